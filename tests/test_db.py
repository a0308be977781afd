"""Warehouse: migrations, views, transactional bulk writers, stage runs."""

import duckdb
import pyarrow as pa
import pytest

from pipeline import db


def test_migrations_apply_once_and_track_version(tmp_path):
    path = tmp_path / "w.duckdb"
    con = db.connect(path)
    version = db.schema_version(con)
    assert version == max(v for v, _ in db.migrations())
    tables = {r[0] for r in con.execute("select table_name from information_schema.tables").fetchall()}
    assert {"rooms", "documents", "trajectories", "grades", "coverage", "stage_runs"} <= tables
    assert {"trajectory_scores", "policy_summary", "rejection_funnel"} <= tables  # views
    con.close()
    con = db.connect(path)  # reopening applies nothing twice
    assert con.execute("select count(*) from schema_version").fetchone()[0] == len(db.migrations())


def test_write_many_is_all_or_nothing(tmp_path):
    con = db.connect(tmp_path / "w.duckdb")
    good = {
        "policy_id": "p1",
        "base_model": "m",
        "backend": "local",
        "prompt": "base",
        "harness": "rlm",
        "sampling": {"t": 1},
        "created_at": db.now(),
    }
    db.write_many(con, {"policies": [good]})
    dup = dict(good)  # violates the primary key
    other = dict(good, policy_id="p2")
    with pytest.raises(duckdb.ConstraintException):
        db.write_many(con, {"policies": [other, dup]})
    ids = [r[0] for r in con.execute("select policy_id from policies order by 1").fetchall()]
    assert ids == ["p1"]  # p2 rolled back with the failing row


def test_unknown_column_is_an_error(tmp_path):
    con = db.connect(tmp_path / "w.duckdb")
    with pytest.raises(KeyError, match="unknown columns"):
        db.write_rows(con, "policies", [{"policy_id": "x", "nope": 1}])


def test_write_arrow_bulk(tmp_path):
    con = db.connect(tmp_path / "w.duckdb")
    n = 50_000
    t = pa.table(
        {
            "trajectory_id": ["t"] * n,
            "criterion_id": [f"c{i}" for i in range(n)],
            "judge": ["reference"] * n,
            "passed": [i % 2 == 0 for i in range(n)],
        }
    )
    with db.transaction(con):
        assert db.write_arrow(con, "grades", t) == n
    assert con.execute("select count(*), sum(passed::int) from grades").fetchone() == (n, n // 2)


def test_stage_run_records_success_and_failure(tmp_path):
    con = db.connect(tmp_path / "w.duckdb")
    with db.stage_run(con, "demo", "h1") as counts:
        counts["n"] = 3
    with pytest.raises(ValueError):
        with db.stage_run(con, "demo", "h1"):
            raise ValueError("boom")
    rows = con.execute("select status, counts->>'n', error from stage_runs order by started_at").fetchall()
    assert rows[0][:2] == ("ok", "3")
    assert rows[1][0] == "failed" and "boom" in rows[1][2]


def test_later_migrations_backfill_a_warehouse_written_at_version_1(tmp_path):
    """002 and 003 fill their new columns from what an older warehouse already holds; 004 keeps its rows."""
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    db.schema_version(con)
    con.execute((db.SQL_DIR / "schema" / "001_core.sql").read_text())
    con.execute("insert into schema_version values (1, now())")
    con.execute(
        "insert into criteria values ('r1', 'c1', 'trap', null, null, 'text', '{}', true), "
        "('r1', 'c2', 'quantify', null, null, 'text', '{}', false)"
    )
    con.execute(
        "insert into trajectories (trajectory_id, room_id, policy_id, sample_index, purpose, harness, status, "
        "memo, n_turns, n_subcalls, root_prompt_tokens, root_completion_tokens, sub_prompt_tokens, "
        "sub_completion_tokens, wall_s, delegated_chars, memo_chars, n_findings, n_findings_carried, "
        "started_at, trace) values ('t1', 'r1', 'p', 0, 'train', 'rlm', 'submitted', 'memo', 3, 2, "
        "0, 0, 0, 0, 1.0, 0, 4, 0, 0, now(), '{\"turns\": []}')"
    )
    con.execute(
        "insert into subcalls values ('t1', 0, 1, 1, null, 'x', 'p', 'r', null, 1, 1, 0.1, 0.0, 2.0), "
        "('t1', 1, 0, 1, null, 'x', 'p', 'r', null, 1, 1, 0.1, 0.0, 1.0)"
    )
    con.execute(
        "insert into grades (trajectory_id, criterion_id, judge, passed) values ('t1', 'c1', 'reference', true)"
    )
    con.execute(
        "insert into grades (trajectory_id, criterion_id, judge, passed) values ('t1', 'c2', 'reference', false)"
    )
    con.close()

    con = db.connect(path)
    assert db.schema_version(con) == max(v for v, _ in db.migrations())
    # 002: the memo counts as begun in the last turn; the call that returned last came from turn 1
    assert con.execute("select memo_turn, last_subcall_turn from trajectories").fetchall() == [(2, 1)]
    # 003: grades carry their criterion's kind and trap flag
    got = con.execute("select criterion_id, kind, is_trap from grades order by 1").fetchall()
    assert got == [("c1", "trap", True), ("c2", "quantify", False)]
    assert con.execute("select n_criteria, trap_failures, n_passed from trajectory_scores").fetchall() == [
        (2, 0, 1)
    ]
    # 004: the table was rebuilt with its rows; the primary key remains, the separate key index is gone
    assert con.execute("select trajectory_id, memo, trace from trajectories").fetchall() == [
        ("t1", "memo", '{"turns": []}')
    ]
    kinds = {
        r[0]
        for r in con.execute(
            "select constraint_type from duckdb_constraints() where table_name = 'trajectories'"
        ).fetchall()
    }
    assert "PRIMARY KEY" in kinds and "UNIQUE" not in kinds
    with pytest.raises(duckdb.ConstraintException):
        con.execute("insert into trajectories select * from trajectories")
