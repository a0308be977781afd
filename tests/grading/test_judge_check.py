"""`python -m pipeline judge-check` with a scripted LLM judge on generated (and CUAD) rooms."""

from __future__ import annotations

import contextlib
import io
import json
import re

import pytest

from pipeline import db
from pipeline.cli import main
from pipeline.config import load_config
from pipeline.grading.judge_check import agreement_table, check
from pipeline.grading.known_answers import known_memos
from pipeline.rooms import store
from tests.doubles import SCRIPTED_KIND, SCRIPTS
from tests.grading.test_agreement import _trajectory


def _memo_judge(messages) -> str:
    """Passes every criterion of a memo that has text (resting on its first sentence), fails the rest."""
    user = messages[-1]["content"]
    memo = user.split("<<<\n", 1)[1].split("\n>>>", 1)[0].strip()
    n = len(re.findall(r"^\[\d+\] ", user, flags=re.MULTILINE))
    has_text = len(memo.split()) >= 4
    return json.dumps({str(i): int(has_text) for i in range(1, n + 1)})


SCRIPTS["judge-check-double"] = _memo_judge
# 16k: the claim-stuffing memo of a room with totals outgrows 8k tokens beside a batch of criteria
JUDGE = [
    f"models.judge.kind={SCRIPTED_KIND}",
    "models.judge.model=judge-check-double",
    "models.judge.context_tokens=16384",
]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    """Three tiny generated rooms and two sampled memos of the first."""
    from stages import rooms

    run = tmp_path_factory.mktemp("judge_check") / "run"
    cfg = load_config("tiny", [f"run.dir={run}"])
    rooms.run(cfg)
    con = db.connect(cfg.run.db_path)
    try:
        first = store.room_names(con)[0]
        trajectories = [_trajectory("t1", first), _trajectory("t2", first)]
        trajectories[0]["memo"] = "A memo of a few words about nothing in particular."
        db.write_many(con, {"trajectories": trajectories})
    finally:
        con.close()
    return run


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def test_judge_check_prints_known_answers_and_agreement(warehouse):
    code, out, err = _run(["--recipe", "tiny", "judge-check", f"run.dir={warehouse}", *JUDGE])
    assert code == 0, err
    assert "Known-answer memos" in out and "Agreement of criterion verdicts" in out
    for column in (
        "memo",
        "bar",
        "reference",
        "llm",
        "ref_recall",
        "llm_recall",
        "ungraded",
        "kappa",
        "judge_pass",
    ):
        assert column in out
    assert re.search(r"\d+ criteria judged in [\d.]+ s \([\d.]+ criteria/s\); \d+ \(100\.0%\)", err), err
    check_id = re.search(r"recorded as (judge-check-\S+)", err).group(1)

    # the agreement table is in the warehouse, and the report's judge section shows the newest check
    from pipeline.grading.judge_check import latest_check
    from pipeline.report import sections

    con = db.connect(warehouse / "pipeline.duckdb", read_only=True)
    try:
        rows = latest_check(con)
    finally:
        con.close()
    assert rows and {r["check_id"] for r in rows} == {check_id}
    every = next(r for r in rows if r["memos"] == "all" and r["kind"] == "all")
    assert every["valid"] == every["criteria"] == every["n"] and every["judge"] == "llm:judge-check-double"
    printed = [line for line in out.splitlines() if line.startswith("│ llm:judge-check-double")]
    assert len(printed) == len(rows)  # every printed agreement row was recorded
    section = sections.agreement_section([], rows)
    assert section.title == "Judge agreement" and check_id in section.blocks[0].caption
    assert sections.agreement_section([], []) is None


def test_check_rows(warehouse):
    cfg = load_config("tiny", [f"run.dir={warehouse}", *JUDGE])
    result = check(cfg, sampled=2)
    con = db.connect(cfg.run.db_path, read_only=True)
    try:
        names = store.room_names(con)
        rooms = [store.load_room(con, n, with_text=True) for n in names]
    finally:
        con.close()
    known = result["known"]
    assert len(known) == sum(len(known_memos(r)) for r in rooms)
    by = {(r["room"], r["memo"]): r for r in known}
    empty, oracle = by[(names[0], "empty")], by[(names[0], "oracle")]
    # the double fails every criterion of an empty memo and passes those of the oracle, with valid quotes
    assert empty["reference"] <= 0.05 and empty["llm"] == 0.0 and empty["ungraded"] == 0
    assert oracle["reference"] >= 0.95 and oracle["llm_recall"] == 1.0 and oracle["llm_ok"] is True
    assert empty["bar"] == "[0.00, 0.05]" and empty["ref_ok"] is True
    n_criteria = sum(len(r.criteria) * len(known_memos(r)) for r in rooms) + 2 * len(rooms[0].criteria)
    assert result["criteria"] == result["valid"] == n_criteria

    rows = result["agreement"]
    assert {r["against"] for r in rows} == {"reference"}  # no CUAD rooms here
    every = [r for r in rows if r["memos"] == "all"]
    assert every[-1]["kind"] == "all" and every[-1]["n"] == n_criteria
    assert {r["kind"] for r in every[:-1]} == {c.kind for r in rooms for c in r.criteria}
    sampled = [r for r in rows if r["memos"] == "sampled"]
    assert len(sampled) == 1 and sampled[0]["n"] == 2 * len(rooms[0].criteria)
    assert all(-1 <= r["kappa"] <= 1 for r in rows if r["kappa"] is not None)


def test_errors_exit_1_with_one_line(tmp_path, warehouse):
    code, _, err = _run(["--recipe", "tiny", "judge-check", f"run.dir={tmp_path / 'none'}", *JUDGE])
    assert code == 1 and "no warehouse" in err and "Traceback" not in err
    # the default judge is an OpenAI-compatible server nobody configured
    code, _, err = _run(["--recipe", "tiny", "judge-check", f"run.dir={warehouse}"])
    assert code == 1 and "models.judge" in err and "base_url" in err
    code, _, err = _run(
        ["--recipe", "tiny", "judge-check", f"run.dir={warehouse}", "--corpus", str(tmp_path)]
    )
    assert code == 1 and "no cuad/" in err


@pytest.mark.corpus
def test_cuad_rooms_are_compared_with_the_expert_labels(tmp_path):
    from tests.rooms.test_cuad import corpus_dir

    corpus = corpus_dir()
    if not (corpus / "cuad" / "master_clauses.csv").is_file():
        pytest.skip(f"shared legal corpus not found at {corpus}")
    from pipeline.rooms.cuad import build_cuad_rooms

    cfg = load_config("tiny", [f"run.dir={tmp_path}", *JUDGE])
    con = db.connect(cfg.run.db_path)
    try:
        for room in build_cuad_rooms(corpus, n_rooms=1, contracts_per_room=4, seed=5):
            store.save_room(con, room)
    finally:
        con.close()
    result = check(cfg, corpus=str(corpus), sampled=0)
    assert {r["memo"] for r in result["known"]} >= {"expert_labels", "empty", "oracle"}
    experts = [r for r in result["agreement"] if r["against"] == "cuad-experts"]
    judges = {r["judge"] for r in experts}
    assert judges == {"llm:judge-check-double", "reference"}
    ref_all = next(r for r in experts if r["judge"] == "reference" and r["kind"] == "all")
    llm_all = next(r for r in experts if r["judge"] != "reference" and r["kind"] == "all")
    # the reference judge agrees with the experts on the memos whose verdicts the labels fix
    assert ref_all["agreement"] >= 0.9 and ref_all["n"] > 0
    # the double passes everything of the expert memo and nothing of the empty one: traps disagree
    assert llm_all["n"] == ref_all["n"] and llm_all["agreement"] < 1.0
    # generated-room agreement rows need generated rooms
    assert not [r for r in result["agreement"] if r["against"] == "reference" and r["n"]]


def test_agreement_table_without_results_is_empty():
    assert agreement_table([], "llm:x") == []
