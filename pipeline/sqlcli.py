"""`python -m pipeline sql`: ask the warehouse questions and print tables.

`sql "select ..."` runs one statement, `sql --file sql/queries/x.sql` runs a
file, `sql --shell` (what `make sql` opens) is an interactive loop over the
same DuckDB connection: statements end with ';', `.tables` lists tables and
views, `.quit` leaves. The shell is ours (over the duckdb Python API) rather
than the duckdb CLI binary so its storage version always matches the
library that wrote the file.
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb

from pipeline import db
from pipeline.config import PipelineConfig


def show(con: duckdb.DuckDBPyConnection, sql: str, max_rows: int = 200) -> None:
    rel = con.sql(sql)
    if rel is None:  # a statement without a result (e.g. SET)
        return
    rel.show(max_rows=max_rows, max_width=200)


def main(cfg: PipelineConfig, query: str | None, file: str | None, shell: bool) -> int:
    path = cfg.run.db_path
    if not path.exists():
        print(f"error: no warehouse at {path} (run a stage first, or pass run.dir=...)", file=sys.stderr)
        return 1
    con = db.connect(path)
    if file:
        f = Path(file)
        if not f.exists():
            print(f"error: SQL file not found: {file}", file=sys.stderr)
            return 1
        query = f.read_text()
    if query:
        try:
            show(con, query)
        except duckdb.Error as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0
    if shell or not query:
        return _shell(con, str(path))
    return 0


def _shell(con: duckdb.DuckDBPyConnection, name: str) -> int:
    try:
        import readline  # noqa: F401  (line editing and history when available)
    except ImportError:
        pass
    print(f"DuckDB shell on {name}. End statements with ';'. .tables lists tables and views, .quit exits.")
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
        if not buf and stripped == ".tables":
            show(con, "select table_name, table_type from information_schema.tables order by 1")
            continue
        buf.append(line)
        if stripped.endswith(";"):
            try:
                show(con, "\n".join(buf))
            except duckdb.Error as exc:
                print(f"error: {exc}")
            buf = []
