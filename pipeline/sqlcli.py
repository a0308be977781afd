"""`python -m pipeline sql`: ask the warehouse questions and print tables.

`sql "select ..."` runs one statement, `sql --file sql/queries/x.sql` runs a
file, `sql --shell` (what `make sql` opens) is an interactive loop: statements
end with ';', `.tables` lists tables and views, `.quit` leaves. Read-only by
default, and every statement goes through pipeline.query_client on its own:
to the running command's query server when one holds the warehouse, else to
the file opened read-only for that statement. The shell holds no lock
between statements, so a stage or a nightly round started meanwhile never
waits on it. `--write` opens the file read-write for each statement (waiting
for a running command to finish). The shell is ours (over the duckdb Python
API) rather than the duckdb CLI binary so its storage version always matches
the library that wrote the file.
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import pyarrow as pa

from pipeline.config import PipelineConfig
from pipeline.db import WarehouseBusy
from pipeline.query_client import QueryError, query

TABLES = "select table_name, table_type from information_schema.tables order by 1"


def show(table: pa.Table | None, max_rows: int = 200) -> None:
    if table is None:  # a statement without a result (e.g. SET)
        return
    with duckdb.connect() as mem:
        mem.from_arrow(table).show(max_rows=max_rows, max_width=200)


def main(cfg: PipelineConfig, sql: str | None, file: str | None, shell: bool, write: bool = False) -> int:
    path = cfg.run.db_path
    if file:
        f = Path(file)
        if not f.exists():
            print(f"error: SQL file not found: {file}", file=sys.stderr)
            return 1
        sql = f.read_text()
    if sql:
        try:
            show(query(path, sql, write=write, wait_s=_wait(cfg, write)))
        except (QueryError, WarehouseBusy) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0
    return _shell(cfg, write)


def _wait(cfg: PipelineConfig, write: bool) -> float:
    return cfg.run.lock_timeout_s if write else min(cfg.run.lock_timeout_s, 30.0)


def _shell(cfg: PipelineConfig, write: bool) -> int:
    try:
        import readline  # noqa: F401  (line editing and history when available)
    except ImportError:
        pass
    mode = "read-write" if write else "read-only"
    print(
        f"DuckDB shell on {cfg.run.db_path} ({mode}). End statements with ';'. "
        ".tables lists tables and views, .quit exits.",
        flush=True,
    )
    buf: list[str] = []
    while True:
        try:
            line = input("duckdb> " if not buf else "   ...> ")
        except EOFError:
            print()
            return 0
        stripped = line.strip()
        if not buf and stripped in (".quit", ".exit"):
            return 0
        statement = TABLES if not buf and stripped == ".tables" else None
        if statement is None:
            buf.append(line)
            if not stripped.endswith(";"):
                continue
            statement, buf = "\n".join(buf), []
        try:
            show(query(cfg.run.db_path, statement, write=write, wait_s=_wait(cfg, write)))
        except (QueryError, WarehouseBusy) as exc:
            print(f"error: {exc}")
        sys.stdout.flush()
