"""DuckDB warehouse: connection, migrations, views, transactional bulk writers.

One file holds every stage's inputs and outputs. ``connect`` applies the
numbered migrations in ``sql/schema`` in order (tracked in ``schema_version``)
and (re)creates the views: the staging and mart models under ``sql/``, in the
order their ``-- depends_on:`` headers give (pipeline.sql_models). Writers go
through Arrow tables — DuckDB ingests those at millions of rows per second,
where row-by-row INSERTs manage about a thousand — and always inside a
transaction, so a failed or killed write leaves nothing half-written.

DuckDB lets one process open a file read-write, or many read-only, never
both. A stage keeps its connection for its whole run, so ``connect`` waits
(with backoff, up to ``lock_timeout_s``) while another process holds the
file, and then fails with ``WarehouseBusy`` naming that process: nothing is
written before the lock is held. Analysts do not take the lock while a
command runs: they query through the command's read-only query server
(pipeline.query_server), see pipeline.query_client.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import psutil
import pyarrow as pa

from pipeline.sql_models import ModelError, creation_order, load_models

SQL_DIR = Path(__file__).resolve().parent.parent / "sql"
_MIGRATION = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")


def now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


LOCK_TIMEOUT_S = 300.0
_HOLDER = re.compile(r"Conflicting lock is held in (?P<exe>.*?) \(PID (?P<pid>\d+)\)")


class WarehouseBusy(RuntimeError):
    """Another process held the warehouse file for longer than we could wait."""

    user_facing = True

    def __init__(self, path: Path, message: str, waited_s: float, read_only: bool) -> None:
        self.pid = holder_pid(message)
        who = describe_process(self.pid) if self.pid else "another process"
        hint = (
            "run the query again when it has finished, or query through its server (pipeline sql does)"
            if read_only
            else "stop it or wait for it to finish, or raise run.lock_timeout_s"
        )
        super().__init__(
            f"{path}: the warehouse is held by {who} and was not released in {waited_s:.0f} s; {hint}"
        )


def holder_pid(message: str) -> int | None:
    m = _HOLDER.search(message)
    return int(m.group("pid")) if m else None


def describe_process(pid: int) -> str:
    """'PID 123 (python -m pipeline sql --write)' where the command line can be read."""
    try:
        cmd = " ".join(" ".join(psutil.Process(pid).cmdline()).split())  # one line, whatever argv holds
        cmd = cmd if len(cmd) <= 160 else cmd[:157] + "..."
    except (psutil.Error, OSError):
        cmd = ""
    return f"PID {pid} ({cmd})" if cmd else f"PID {pid}"


def open_file(
    path: str | Path, read_only: bool = False, lock_timeout_s: float = LOCK_TIMEOUT_S
) -> duckdb.DuckDBPyConnection:
    """duckdb.connect, waiting with backoff while another process holds the file's lock."""
    t0 = time.monotonic()
    delay = 0.05
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            if holder_pid(str(exc)) is None and "Conflicting lock" not in str(exc):
                raise
            waited = time.monotonic() - t0
            if waited >= lock_timeout_s:
                raise WarehouseBusy(Path(path), str(exc), waited, read_only) from None
            time.sleep(min(delay, max(lock_timeout_s - waited, 0.01)))
            delay = min(delay * 2, 1.0)


def connect(
    path: str | Path, read_only: bool = False, lock_timeout_s: float = LOCK_TIMEOUT_S
) -> duckdb.DuckDBPyConnection:
    """Open (creating if needed) the warehouse and bring its schema up to date."""
    path = Path(path)
    if str(path) != ":memory:":
        path.parent.mkdir(parents=True, exist_ok=True)
    con = open_file(path, read_only, lock_timeout_s)
    if not read_only:
        migrate(con)
        create_views(con)
    return con


def migrations() -> list[tuple[int, Path]]:
    out = []
    for p in sorted((SQL_DIR / "schema").glob("*.sql")):
        m = _MIGRATION.match(p.name)
        if not m:
            raise RuntimeError(f"{p}: migration files are named NNN_name.sql")
        out.append((int(m.group(1)), p))
    versions = [v for v, _ in out]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"{SQL_DIR / 'schema'}: duplicate migration numbers {versions}")
    return out


def schema_version(con: duckdb.DuckDBPyConnection) -> int:
    con.execute(
        "create table if not exists schema_version (version integer primary key, applied_at timestamp)"
    )
    row = con.execute("select coalesce(max(version), 0) from schema_version").fetchone()
    return int(row[0])


def migrate(con: duckdb.DuckDBPyConnection) -> int:
    current = schema_version(con)
    for version, path in migrations():
        if version <= current:
            continue
        with transaction(con):
            con.execute(path.read_text())
            con.execute("insert into schema_version values (?, ?)", [version, now()])
        current = version
    return current


def create_views(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Create every model in sql/staging and sql/marts as a view, in declared dependency order.

    A missing or cyclic dependency, or a model DuckDB cannot bind, fails with
    one line naming the file (pipeline.sql_models).
    """
    tables = {r[0] for r in con.execute("select table_name from duckdb_tables()").fetchall()}
    created: list[str] = []
    for model in creation_order(load_models(SQL_DIR), tables):
        try:
            con.execute(f"create or replace view {model.name} as\n{model.sql}")
        except duckdb.Error as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ModelError(f"{model.relpath}: {first}") from exc
        created.append(model.name)
    return created


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    con.execute("begin transaction")
    try:
        yield con
    except BaseException:
        con.execute("rollback")
        raise
    else:
        con.execute("commit")


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str]]:
    rows = con.execute(
        "select column_name, data_type from information_schema.columns "
        "where table_name = ? order by ordinal_position",
        [table],
    ).fetchall()
    if not rows:
        raise KeyError(f"no table {table!r} in the warehouse")
    return [(r[0], r[1]) for r in rows]


def _jsonify(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, default=str)


def rows_to_arrow(con: duckdb.DuckDBPyConnection, table: str, rows: Sequence[dict[str, Any]]) -> pa.Table:
    """Column-oriented Arrow table for ``table`` from dicts.

    Values bound for JSON and VARCHAR columns that are not already text are
    serialised as JSON (some JSON documents live in VARCHAR columns, see
    sql/schema/002), so a dict never reaches a text column as Arrow's struct.
    """
    cols = _columns(con, table)
    known = {c for c, _ in cols}
    for i, row in enumerate(rows):
        extra = set(row) - known
        if extra:
            raise KeyError(f"{table}: row {i} has unknown columns {sorted(extra)}")
    data = {}
    for name, dtype in cols:
        values = [row.get(name) for row in rows]
        if dtype in ("JSON", "VARCHAR"):
            values = [_jsonify(v) for v in values]
        data[name] = values
    return pa.table(data)


def write_arrow(con: duckdb.DuckDBPyConnection, table: str, data: pa.Table) -> int:
    """Append an Arrow table (columns named as the target's). Caller owns the transaction."""
    if data.num_rows == 0:
        return 0
    name = f"_arrow_{uuid.uuid4().hex[:8]}"
    con.register(name, data)
    try:
        cols = ", ".join(f'"{c}"' for c in data.column_names)
        con.execute(f"insert into {table} ({cols}) select {cols} from {name}")
    finally:
        # Unregistering inside an aborted transaction fails and would hide the real error.
        with contextlib.suppress(duckdb.Error):
            con.unregister(name)
    return data.num_rows


def write_rows(con: duckdb.DuckDBPyConnection, table: str, rows: Sequence[dict[str, Any]]) -> int:
    if not rows:
        return 0
    return write_arrow(con, table, rows_to_arrow(con, table, rows))


def write_many(con: duckdb.DuckDBPyConnection, tables: dict[str, Sequence[dict[str, Any]]]) -> dict[str, int]:
    """Write rows into several tables in one transaction: all of them or none."""
    with transaction(con):
        return {t: write_rows(con, t, rows) for t, rows in tables.items()}


@contextlib.contextmanager
def stage_run(
    con: duckdb.DuckDBPyConnection, stage: str, config_hash: str, command: str = ""
) -> Iterator[dict]:
    """Record a stage run; the body fills the yielded dict with counts."""
    run_id = f"{stage}-{now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
    con.execute(
        "insert into stage_runs (run_id, stage, config_hash, command, started_at, status) values (?,?,?,?,?,?)",
        [run_id, stage, config_hash, command, now(), "running"],
    )
    counts: dict[str, Any] = {"run_id": run_id}
    try:
        yield counts
    except BaseException as exc:
        con.execute(
            "update stage_runs set ended_at=?, status='failed', counts=?, error=? where run_id=?",
            [now(), json.dumps(counts, default=str), f"{type(exc).__name__}: {exc}"[:2000], run_id],
        )
        raise
    con.execute(
        "update stage_runs set ended_at=?, status='ok', counts=? where run_id=?",
        [now(), json.dumps(counts, default=str), run_id],
    )


def fetch_dicts(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None = None) -> list[dict]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def read_sql(relpath: str) -> str:
    """Text of a file under sql/ (e.g. 'filters/select.sql')."""
    return (SQL_DIR / relpath).read_text()
