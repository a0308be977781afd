"""Lineage: steps take the ids they consume, the CLI picks and prints defaults, the chain can be asked.

The fast tests build stage runs and lineage rows in a real DuckDB file; the
slow ones read (copies of) one real tiny `distill` run folder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipeline import db, lineage
from pipeline.cli import main
from pipeline.config import load_config


def _run(con, stage: str, outputs: list[tuple[str, str]], status: str = "ok", inputs=()) -> str:
    with db.stage_run(con, stage, "h") as counts:
        lineage.record(con, counts["run_id"], stage, list(inputs), outputs)
        if status == "failed":
            raise RuntimeError("boom")
    return counts["run_id"]


@pytest.fixture
def warehouse(tmp_path):
    cfg = load_config("tiny", [f"run.dir={tmp_path / 'run'}"])
    con = db.connect(cfg.run.db_path)
    yield cfg, con
    con.close()


def test_the_newest_finished_run_decides_not_the_newest_row(warehouse):
    _, con = warehouse
    assert lineage.newest_output(con, "filter", "selection") is None
    _run(con, "filter", [("selection", "sel-a")])
    _run(con, "filter", [("selection", "sel-b")])
    _run(con, "filter", [("selection", "sel-a")])  # A again: its selection already existed
    assert lineage.newest_output(con, "filter", "selection").id == "sel-a"
    with pytest.raises(RuntimeError):
        _run(con, "filter", [("selection", "sel-c")], status="failed")
    made = lineage.newest_output(con, "filter", "selection")
    assert made.id == "sel-a" and "made by the filter run filter-" in made.says("selection", "filter")


def test_cli_edge_prints_its_choice_and_an_explicit_id_wins(warehouse, capsys):
    import argparse

    from pipeline.cli import _fill_inputs

    cfg, con = warehouse
    _run(con, "train", [("train_run", "train-1"), ("policy", "sft-1")])
    _run(con, "train", [("train_run", "train-2"), ("policy", "sft-2")])
    _run(con, "dataset", [("dataset", "ds-1")])
    _run(con, "dataset", [("dataset", "ds-2")])
    con.close()
    _fill_inputs(argparse.Namespace(command="evaluate", policy=None), cfg)
    assert cfg.evaluate.candidates == ["sft-2"]
    assert "evaluate: using policy sft-2 (made by the train run train-" in capsys.readouterr().out
    _fill_inputs(argparse.Namespace(command="train", dataset=None), cfg)
    assert cfg.train.dataset_id == "ds-2"
    _fill_inputs(argparse.Namespace(command="train", dataset="ds-1"), cfg)
    assert cfg.train.dataset_id == "ds-1"
    capsys.readouterr()
    cfg.evaluate.candidates = ["sft-1"]  # a config key wins over the newest too
    _fill_inputs(argparse.Namespace(command="evaluate", policy=None), cfg)
    assert cfg.evaluate.candidates == ["sft-1"] and capsys.readouterr().out == ""


def test_no_run_to_default_from_is_one_line(tmp_path, capsys):
    run = tmp_path / "run"
    db.connect(run / "pipeline.duckdb").close()
    assert main(["train", f"run.dir={run}"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: train: no dataset run has made a dataset yet: run `dataset` first, or name one"]
    assert main(["lineage", "sft-nope", f"run.dir={run}"]) == 1
    assert "no policy, dataset or selection 'sft-nope'" in capsys.readouterr().err


def test_stored_paths_are_relative_inside_the_run_folder(tmp_path):
    from pipeline.run_folder import resolve_path, stored_path

    run = tmp_path / "run"
    assert stored_path(run, run / "adapters" / "train-1") == "adapters/train-1"
    assert resolve_path(run, "adapters/train-1") == run / "adapters" / "train-1"
    outside = tmp_path / "elsewhere" / "adapter"
    assert stored_path(run, outside) == str(outside.resolve())
    assert resolve_path(run, str(outside)) == outside


# ----------------------------------------------------------------------------- on a real distill


def _sft_policy(run: Path) -> str:
    con = db.connect(run / "pipeline.duckdb", read_only=True)
    try:
        return con.execute("select policy_id from policies where adapter is not null").fetchone()[0]
    finally:
        con.close()


@pytest.mark.slow
def test_lineage_of_the_sft_policy_matches_the_warehouse(distilled, tmp_path, capsys):
    run = distilled.copy(tmp_path / "run")
    sft = _sft_policy(run)
    assert main(["lineage", sft, f"run.dir={run}"]) == 0
    text = capsys.readouterr().out
    con = db.connect(run / "pipeline.duckdb", read_only=True)
    train_id, dataset_id, chash = con.execute(
        "select train_id, dataset_id, config_hash from train_runs where policy_id = ?", [sft]
    ).fetchone()
    selection_id = con.execute(
        "select selection_id from datasets where dataset_id = ?", [dataset_id]
    ).fetchone()[0]
    per_room = con.execute(
        "select r.name, t.policy_id, count(*) from selections s join trajectories t using (trajectory_id) "
        "join rooms r using (room_id) where s.selection_id = ? and s.accepted group by all",
        [selection_id],
    ).fetchall()
    # the round recorded what each step consumed: the dataset run read this selection, train this dataset
    consumed = dict(
        con.execute(
            "select stage, id from lineage where role = 'input' and kind in ('selection', 'dataset')"
        ).fetchall()
    )
    con.close()
    assert consumed == {"dataset": selection_id, "train": dataset_id}
    lines = text.splitlines()
    assert lines[0].startswith(f"policy {sft}")
    order = [
        f"train run {train_id}",
        f"dataset {dataset_id}",
        f"selection {selection_id}",
        "trajectories",
        "rooms",
    ]
    at = [next(i for i, line in enumerate(lines) if o in line) for o in order]
    assert at == sorted(at) and f"config {chash}" in lines[at[0]]
    for room, policy, n in per_room:
        assert any(room in line and policy in line and line.split()[-1] == str(n) for line in lines)
    # the adapter's model card carries the same chain
    card = (run / "adapters" / train_id / "README.md").read_text()
    assert "## Lineage" in card and f"selection {selection_id}" in card and f"train run {train_id}" in card


@pytest.mark.slow
def test_filter_a_b_a_then_dataset_builds_from_a(distilled, tmp_path, capsys):
    run = distilled.copy(tmp_path / "run")
    capsys.readouterr()
    assert main(["filter", f"run.dir={run}"]) == 0  # no --recipe: the run folder's own (tiny)
    assert "using the run folder's recipe" in capsys.readouterr().err
    assert main(["filter", "filter.top_k_per_room=1", f"run.dir={run}"]) == 0
    assert main(["filter", "filter.min_score=0.99", f"run.dir={run}"]) == 1  # accepts nothing: fails
    assert main(["filter", f"run.dir={run}"]) == 0
    capsys.readouterr()
    assert main(["dataset", f"run.dir={run}"]) == 0
    out = capsys.readouterr().out
    con = db.connect(run / "pipeline.duckdb", read_only=True)
    outputs = con.execute(
        "select s.status, l.id from stage_runs s left join lineage l using (run_id) "
        "where s.stage = 'filter' order by s.started_at"
    ).fetchall()
    a, b = outputs[-4][1], outputs[-3][1]
    assert a != b and outputs[-2] == ("failed", None) and outputs[-1] == ("ok", a)
    built = con.execute("select selection_id from datasets order by created_at desc limit 1").fetchone()[0]
    params = json.loads(
        con.execute("select any_value(params) from selections where selection_id = ?", [a]).fetchone()[0]
    )
    con.close()
    assert built == a and f"dataset: using selection {a} (made by the filter run filter-" in out
    # the tiny recipe's filter, not the dataclass defaults (min_score 0.3, min_coverage 0.5)
    assert (params["min_score"], params["min_coverage"]) == (0.0, 0.0)
    # commands.jsonl says which recipe each command named: distill's --recipe, then the folder's own
    from pipeline.run_folder import read_records

    named = [(r["command"], r["recipe"]) for r in read_records(run)]
    assert named[0] == ("distill", "tiny") and named[-1] == ("dataset", None)


@pytest.mark.slow
def test_a_copied_run_folder_evaluates_and_serves_its_sft_policy(distilled, tmp_path, capsys):
    import requests

    from pipeline.llm.lora_modules import unload_lora_module
    from pipeline.policies import load_policy

    first = distilled.copy(tmp_path / "first")
    moved = tmp_path / "moved"
    shutil.copytree(first, moved)
    shutil.rmtree(first)
    sft = _sft_policy(moved)
    con = db.connect(moved / "pipeline.duckdb", read_only=True)
    policy = load_policy(con, sft)
    con.close()
    # The server still holds the adapter distill loaded from the original folder: drop it, so the
    # evaluation below has the server load it again, and from the copy.
    base_url = f"http://127.0.0.1:{distilled.port}/v1"
    unload_lora_module(base_url, policy.lora_module)
    # a second evaluation samples afresh: one more trajectory per policy, from the module the server
    # loaded from the copy
    assert main(["evaluate", f"run.dir={moved}"]) == 0
    assert f"evaluate: using policy {sft}" in capsys.readouterr().out
    con = db.connect(moved / "pipeline.duckdb", read_only=True)
    n, errors = con.execute(
        "select count(*), count(*) filter (where status = 'error') from trajectories "
        "where policy_id = ? and purpose = 'eval'",
        [sft],
    ).fetchone()
    con.close()
    assert n == 2 and errors == 0
    assert not Path(policy.adapter).is_absolute()  # stored relative to the run folder
    # vLLM lists each LoRA module with the folder it loaded it from
    cards = {m["id"]: m for m in requests.get(f"{base_url}/models", timeout=10).json()["data"]}
    assert Path(cards[policy.lora_module]["root"]).resolve() == (moved / policy.adapter).resolve()
    assert not first.exists()


@pytest.mark.slow
def test_no_absolute_path_of_the_run_folder_is_stored(distilled):
    run = distilled.run_dir
    needles = {str(run), str(run.resolve())}
    con = db.connect(run / "pipeline.duckdb", read_only=True)
    columns = con.execute(
        "select table_name, column_name from information_schema.columns "
        "where table_schema = 'main' and data_type in ('VARCHAR', 'JSON') "
        "and table_name in (select table_name from information_schema.tables where table_type = 'BASE TABLE')"
    ).fetchall()
    found = []
    for table, column in columns:
        for needle in needles:
            n = con.execute(
                f'select count(*) from "{table}" where contains("{column}"::varchar, ?)', [needle]
            ).fetchone()[0]
            if n:
                found.append(f"{table}.{column}: {n} rows")
    con.close()
    assert len(columns) > 50 and found == []
