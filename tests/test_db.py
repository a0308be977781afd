"""Warehouse: migrations, views, transactional bulk writers, stage runs."""

import shutil

import duckdb
import pyarrow as pa
import pytest

from pipeline import db
from pipeline.sql_models import LAYERS, ModelError, creation_order, load_models


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


def _models(tmp_path, files: dict[str, str]):
    for rel, sql in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(sql)
    return load_models(tmp_path)


def test_views_are_created_in_declared_dependency_order(tmp_path):
    con = db.connect(tmp_path / "w.duckdb")
    created = db.create_views(con)
    assert set(created) == {p.stem for layer in LAYERS for p in (db.SQL_DIR / layer).glob("*.sql")}
    for model in load_models(db.SQL_DIR):
        for dep in model.depends_on:
            if dep in created:
                assert created.index(dep) < created.index(model.name), (model.name, dep)
    # readers keep their views: the marts carry today's names
    assert {"trajectory_scores", "policy_summary", "room_policy_summary", "pass_rate_by_kind", "rejection_funnel"} <= set(created)  # fmt: skip
    assert all(
        name.startswith("stg_") for name in created[: len(list((db.SQL_DIR / "staging").glob("*.sql")))]
    )


def test_models_order_from_their_declarations(tmp_path):
    models = _models(
        tmp_path,
        {
            "marts/a_mart.sql": "-- depends_on: z_mart, stg_t\nselect * from z_mart join stg_t using (x)",
            "marts/z_mart.sql": "-- depends_on: stg_t\nselect * from stg_t",
            "staging/stg_t.sql": "-- depends_on: raw\nselect * from raw",
        },
    )
    assert [m.name for m in creation_order(models, {"raw"})] == ["stg_t", "z_mart", "a_mart"]


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (
            {"marts/m.sql": "-- depends_on: nowhere\nselect 1"},
            "sql/marts/m.sql: depends on nowhere, which is neither a model nor a table",
        ),
        (
            {
                "marts/a.sql": "-- depends_on: b\nselect * from b",
                "marts/b.sql": "-- depends_on: a\nselect * from a",
            },
            "sql/marts/a.sql: dependency cycle a -> b -> a",
        ),
        (
            {
                "staging/stg_x.sql": "-- depends_on: raw\nselect * from raw",
                "marts/m.sql": "select * from stg_x",
            },
            "sql/marts/m.sql: reads stg_x without declaring it",
        ),
        (
            {"staging/stg_x.sql": "-- depends_on: m\nselect * from m", "marts/m.sql": "select 1"},
            "sql/staging/stg_x.sql: depends on m, a model of a later layer",
        ),
        ({"staging/x.sql": "select 1"}, "sql/staging/x.sql: staging models are named stg_<name>"),
    ],
)
def test_a_bad_dependency_fails_with_one_line_naming_the_file(tmp_path, files, message):
    with pytest.raises(ModelError) as err:
        creation_order(_models(tmp_path, files), {"raw"})
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_view_that_does_not_bind_names_its_file(tmp_path, monkeypatch):
    sql_dir = tmp_path / "sql"
    shutil.copytree(db.SQL_DIR / "schema", sql_dir / "schema")
    (sql_dir / "marts").mkdir()
    (sql_dir / "marts" / "broken.sql").write_text("-- depends_on: rooms\nselect no_such_column from rooms")
    monkeypatch.setattr(db, "SQL_DIR", sql_dir)
    with pytest.raises(ModelError, match=r"^sql/marts/broken\.sql: .*no_such_column"):
        db.connect(tmp_path / "w.duckdb")
