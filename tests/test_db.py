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
