"""program-check: the ladder of reference root programs, run through the real harness and judge."""

from __future__ import annotations

import asyncio
import contextlib
import io

from pipeline import db
from pipeline.cli import main
from pipeline.config import BackendConfig, HarnessConfig
from pipeline.grading.program_check import (
    LadderCell,
    generated_rooms,
    ladder_table,
    load_ladder,
    margin_failures,
    run_ladder,
)
from pipeline.llm.base import make_backend


def _cells(room_set: str, means: list[float]) -> list[LadderCell]:
    names = [r.name for r in load_ladder()]
    return [LadderCell(n, room_set, m, m, m, 4, 1.0) for n, m in zip(names, means, strict=True)]


def test_the_ladder_is_nothing_to_best_and_every_program_submits():
    assert [r.name for r in load_ladder()] == ["nothing", "quarter", "half", "everything", "joins", "best"]
    for rung in load_ladder():
        assert "submit(" in rung.program and rung.skill


def test_margins_catch_a_rung_out_of_order_and_a_small_top_gap():
    assert margin_failures(_cells("generated", [0.0, 0.2, 0.3, 0.5, 0.6, 0.8])) == []
    broken = margin_failures(_cells("generated", [0.0, 0.2, 0.18, 0.5, 0.6, 0.8]))
    assert len(broken) == 1 and "half" in broken[0]
    near = margin_failures(_cells("generated", [0.0, 0.2, 0.3, 0.5, 0.56, 0.62]))
    assert any("top rung" in f for f in near)
    # CUAD rooms: the order up to `everything` only, with no minimum step
    assert margin_failures(_cells("cuad", [0.0, 0.1, 0.11, 0.5, 0.4, 0.1])) == []
    assert margin_failures(_cells("cuad", [0.0, 0.3, 0.2, 0.5, 0.4, 0.1]))


def test_each_rung_scores_clearly_above_the_one_below_on_unseen_generated_rooms():
    """The real harness (sandboxed REPL), the extractive reader and the reference judge on four
    rooms of seeds no recipe uses: the ladder holds its margins, and the top rung's memos are what the
    judge is built to reward (findings, citations, amounts, next steps) rather than length."""
    rooms = [("generated", r) for r in generated_rooms(4)]
    rows = asyncio.run(run_ladder(rooms, make_backend(BackendConfig(kind="extractive")), HarnessConfig()))
    assert all(r.status == "submitted" for r in rows), [r for r in rows if r.status != "submitted"]
    cells = ladder_table(rows)
    assert margin_failures(cells) == [], cells
    by = {c.rung: c for c in cells}
    assert by["nothing"].mean < 0.1 and by["best"].mean > 0.8
    # scope is a skill: reading more costs more of the subagent budget
    tokens = {
        r: sum(x.subagent_tokens for x in rows if x.rung == r) for r in ("quarter", "half", "everything")
    }
    assert tokens["quarter"] < tokens["half"] < tokens["everything"]


def test_program_check_command_prints_the_table_and_exits_zero_when_every_bar_holds():
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--recipe", "tiny", "program-check", "--rooms", "3"])
    assert code == 0, err.getvalue()
    table = out.getvalue()
    for rung in ("nothing", "quarter", "half", "everything", "joins", "best"):
        assert f"| {rung} |" in table
    assert "every bar holds" in err.getvalue()


def test_the_ladder_on_a_runs_rooms_is_stored_once_and_places_each_trajectory(tmp_path):
    """A real DuckDB file: the ladder step scores each room once (a second call scores none), and the
    mart trajectory_rungs puts a graded empty memo below the rungs and the `best` program's memo on top."""
    from pipeline import steps
    from pipeline.config import load_config
    from pipeline.grading.oracle import evidence_memo
    from pipeline.rooms import store
    from stages import rooms as rooms_stage
    from tests.grading.test_agreement import _trajectory

    cfg = load_config("tiny", [f"run.dir={tmp_path / 'run'}"])
    rooms_stage.run(cfg)
    con = db.connect(cfg.run.db_path)
    try:
        names = store.room_names(con)
        assert steps.ladder(con, cfg, names)["rooms_scored"] == len(names)
        assert steps.ladder(con, cfg, names)["rooms_scored"] == 0
        ladder = db.fetch_dicts(con, "select * from room_ladder order by room_id, rung_index")
        assert len(ladder) == len(names) * len(load_ladder())
        first = store.load_room(con, names[0], with_text=True)
        mine = {r["rung"]: r["headline"] for r in ladder if r["room_id"] == first.room_id}
        assert mine["nothing"] < mine["everything"] < mine["best"]
        rows = [_trajectory("t1", first.room_id), _trajectory("t2", first.room_id)]
        rows[0]["memo"], rows[1]["memo"] = "", evidence_memo(first)
        db.write_many(con, {"trajectories": rows})
        steps.grade(con, cfg)
        placed = {r["trajectory_id"]: r for r in db.fetch_dicts(con, "select * from trajectory_rungs")}
        assert placed["t2"]["rung"] == "best"  # the oracle memo scores at least what the best program does
        assert placed["t1"]["rung"] in ("below nothing", "nothing")
    finally:
        con.close()
