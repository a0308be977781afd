"""SQL data tests (sql/tests/*.sql) on a real warehouse, and proof that each can fail.

Each data test is a query returning the rows that violate one invariant. The
warehouse is built once per module by the tiny recipe's own stages: rooms
(documents, criteria, probes), two sampled trajectories written through the
trace store with turns, subagent calls and coverage, then the grade stage.
Every data test must return nothing there; on a copy with one violation
planted, the data test must return it. The example queries in sql/queries
must run on the same warehouse.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from pipeline import db
from pipeline.config import load_config
from pipeline.grading.coverage import coverage_rows
from pipeline.grading.known_answers import evidence_memo
from pipeline.harness.trace import Subcall, Trace, Turn
from pipeline.rooms import store
from pipeline.sql_models import data_tests
from pipeline.trace_store import TraceWriter, trajectory_id
from stages import grade, rooms

DATA_TESTS = data_tests(db.SQL_DIR)
QUERIES = sorted((db.SQL_DIR / "queries").glob("*.sql"))

CHILD_TABLES = ["turns", "subcalls", "grades", "memo_scores", "coverage"]


def _orphan(table: str) -> str:
    """A copy of one of ``table``'s rows, pointing at a trajectory that does not exist."""
    return f"insert into {table} select * replace ('t-missing' as trajectory_id) from {table} limit 1"


# One statement per data test that breaks exactly its invariant in a copy of the warehouse.
PLANTED: dict[str, list[str]] = {
    "unique_grades": ["insert into grades select * from grades limit 1"],
    "orphan_rows": [_orphan("turns")],
    "trajectories_in_known_rooms": [
        "insert into trajectories select * replace ('t-elsewhere' as trajectory_id, 'r-missing' as room_id) "
        "from trajectories limit 1"
    ],
    "grades_for_known_criteria": [
        "insert into grades select * replace ('c-missing' as criterion_id) from grades limit 1"
    ],
    "probes_inside_documents": [
        "insert into probes select * replace (probe_id + 1000000 as probe_id, 'not in the document' as text) "
        "from probes limit 1"
    ],
    "coverage_seen_within_probes": [
        "insert into coverage select * replace (n_probes + 1 as n_seen) from coverage limit 1"
    ],
    "trajectory_scores_in_unit_range": [
        "update memo_scores set recall = 1.5 where trajectory_id = (select min(trajectory_id) from memo_scores)"
    ],
    "one_score_row_per_trajectory": [
        # a model regression: the staging view forgets to keep only the newest grader version
        "insert into memo_scores select * replace (grader_version - 1 as grader_version) from memo_scores limit 1",
        "create or replace view stg_reference_memo_scores as select * from memo_scores where judge = 'reference'",
    ],
}


def _trace(tid: str, room_name: str, memo: str, with_calls: bool) -> Trace:
    """A submitted root trajectory: two turns, and (optionally) two subagent calls from the first."""
    trace = Trace(tid, room_name, "p1", status="submitted", memo=memo, started_at="2026-12-01T00:00:00")
    trace.turns = [
        Turn(0, [{"role": "user", "content": "task"}], "```python\nprint(1)\n```", "print(1)", "1"),
        Turn(1, [{"role": "user", "content": "1"}], "```python\nsubmit(m)\n```", "submit(m)"),
    ]
    if with_calls:
        trace.subcalls = [
            Subcall(i, 0, 1, "sub", f"read folder {i}", "no issues", issued_s=0.1, returned_s=0.5 + i)
            for i in range(2)
        ]
    return trace


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("sql_data")
    overrides = [f"run.dir={run}", "rooms.n_rooms=1", "rooms.heldout_fraction=0.0"]
    rooms.run(load_config("tiny", overrides))
    path = run / "pipeline.duckdb"
    con = db.connect(path)
    room = store.load_room(con, store.room_names(con)[0])
    writer = TraceWriter(con)
    for index, memo in enumerate([evidence_memo(room), "Nothing of note."]):
        tid = trajectory_id("p1", room.room_id, "train", index)
        trace = _trace(tid, room.name, memo, with_calls=index == 0)
        writer.add_trace(
            trace,
            room_id=room.room_id,
            policy_id="p1",
            sample_index=index,
            purpose="train",
            coverage=coverage_rows(trace, room),
        )
    writer.flush()
    con.close()
    grade.run(load_config("tiny", overrides))
    return path


def _violations(con: duckdb.DuckDBPyConnection, name: str) -> list[tuple]:
    return con.execute(DATA_TESTS[name]).fetchall()


def test_the_warehouse_holds_every_kind_of_row(warehouse):
    con = db.connect(warehouse)
    for table in ["documents", "criteria", "probes", "trajectories", "turns", "subcalls", "grades", "memo_scores", "coverage"]:  # fmt: skip
        assert con.execute(f"select count(*) from {table}").fetchone()[0] > 0, f"{table} is empty"
    con.close()


@pytest.mark.parametrize("name", sorted(DATA_TESTS))
def test_data_test_passes_on_a_real_warehouse(warehouse, name):
    con = db.connect(warehouse)
    try:
        assert _violations(con, name) == []
    finally:
        con.close()


def test_every_data_test_has_a_planted_violation():
    assert sorted(PLANTED) == sorted(DATA_TESTS)


@pytest.mark.parametrize("table", CHILD_TABLES)
def test_orphan_rows_names_each_child_table(warehouse, tmp_path, table):
    copy = tmp_path / "orphan.duckdb"
    shutil.copy(warehouse, copy)
    con = duckdb.connect(str(copy))
    try:
        con.execute(_orphan(table))
        assert _violations(con, "orphan_rows") == [(table, "t-missing")]
    finally:
        con.close()


@pytest.mark.parametrize("name", sorted(DATA_TESTS))
def test_data_test_catches_a_planted_violation(warehouse, tmp_path, name):
    copy = tmp_path / "broken.duckdb"
    shutil.copy(warehouse, copy)
    # opened directly: connect would recreate the views, undoing a planted model regression
    con = duckdb.connect(str(copy))
    try:
        for statement in PLANTED[name]:
            con.execute(statement)
        assert _violations(con, name), f"sql/tests/{name}.sql missed the planted violation"
    finally:
        con.close()


@pytest.mark.parametrize("path", QUERIES, ids=[p.stem for p in QUERIES])
def test_example_query_runs(warehouse, path):
    con = db.connect(warehouse, read_only=True)
    try:
        con.execute(path.read_text()).fetchall()
    finally:
        con.close()
