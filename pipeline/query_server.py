"""Read-only queries answered by the command that holds the warehouse.

DuckDB lets one process hold a database file read-write and no other
process read it meanwhile. A stage holds the file for its whole run, so
every command that writes also serves read-only SQL over HTTP from inside
its own process, where DuckDB's MVCC lets any number of connections read
committed rows while the stage writes. The server's address sits beside
the database in ``<db>.readers.json`` (pid, host, port, token; mode 0600);
pipeline.query_client finds it there, so `pipeline sql` answers during a
run without ever taking the file's lock, and a nightly round never fails
because an analyst left a shell open.

Only SELECT and EXPLAIN statements run (DuckDB's own parser classifies
them), inside a transaction that is rolled back. Binding to 0.0.0.0
(``run.query_host``) serves analysts on other machines; the token in the
advertisement (readable by whoever can read the run folder) is required.

    with serve_readers(db_path, host="127.0.0.1", port=0, command="sample"):
        ...  # run the stage
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

ARROW_STREAM = "application/vnd.apache.arrow.stream"
READ_STATEMENTS = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
MAX_QUERY_BYTES = 1 << 20
# When a command ends, analysts' running queries get this long to finish before they are interrupted.
QUERY_GRACE_S = 10.0


class NotReadOnly(ValueError):
    """A statement that could change the warehouse was sent to the read-only server."""


def advert_path(db_path: str | Path) -> Path:
    db_path = Path(db_path)
    return db_path.with_name(db_path.name + ".readers.json")


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    statements = con.extract_statements(sql)
    if not statements:
        raise NotReadOnly("empty query")
    for st in statements:
        if st.type not in READ_STATEMENTS:
            kind = str(st.type).rsplit(".", 1)[-1]
            raise NotReadOnly(
                f"{kind} statements are refused while a command holds the warehouse (read-only server); "
                "run them with `pipeline sql --write` when it has finished"
            )


def to_table(rel: duckdb.DuckDBPyRelation) -> pa.Table:
    fetch = getattr(rel, "to_arrow_table", None) or rel.fetch_arrow_table
    return fetch()


def read_query(con: duckdb.DuckDBPyConnection, sql: str) -> pa.Table | None:
    """Run read-only SQL (checked first) in a transaction that is rolled back; the last result."""
    check_read_only(con, sql)
    con.execute("begin transaction")
    try:
        rel = con.sql(sql)
        return None if rel is None else to_table(rel)
    finally:
        con.execute("rollback")


def arrow_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


class _Handler(BaseHTTPRequestHandler):
    server: _QueryServer
    # A client that connects and sends nothing cannot hold the stage's exit (which joins handlers) longer.
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (stdlib signature)
        pass  # a stage's terminal is for the stage

    def _reply(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str) -> None:
        self._reply(status, json.dumps({"error": message}).encode())

    def do_GET(self) -> None:  # noqa: N802  (stdlib naming)
        if self.path != "/health":
            return self._error(HTTPStatus.NOT_FOUND, f"no such path {self.path}")
        health = {
            "pid": os.getpid(),
            "command": self.server.command,
            "queries": self.server.running_queries(),
        }
        self._reply(HTTPStatus.OK, json.dumps(health).encode())

    def do_POST(self) -> None:  # noqa: N802
        if self.path != "/query":
            return self._error(HTTPStatus.NOT_FOUND, f"no such path {self.path}")
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_QUERY_BYTES:
            return self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"query over {MAX_QUERY_BYTES} bytes")
        try:
            body = json.loads(self.rfile.read(length))
            sql, token = str(body["sql"]), str(body.get("token", ""))
        except (ValueError, KeyError, TypeError):
            return self._error(HTTPStatus.BAD_REQUEST, 'body must be JSON {"sql": ..., "token": ...}')
        if not secrets.compare_digest(token, self.server.token):
            return self._error(HTTPStatus.FORBIDDEN, "wrong token (read it from the run's .readers.json)")
        if not self.server.db_path.exists():
            return self._error(HTTPStatus.SERVICE_UNAVAILABLE, "no warehouse yet")
        try:
            # In this process DuckDB shares the stage's open database (same file, same config):
            # a new connection reads what the stage has committed, without a second lock.
            con = duckdb.connect(str(self.server.db_path))
        except duckdb.Error as exc:
            return self._error(HTTPStatus.SERVICE_UNAVAILABLE, str(exc))
        self.server.begin_query(con)
        try:
            table = read_query(con, sql)
        except NotReadOnly as exc:
            return self._error(HTTPStatus.FORBIDDEN, str(exc))
        except duckdb.Error as exc:
            return self._error(HTTPStatus.BAD_REQUEST, str(exc))
        finally:
            self.server.end_query(con)
            con.close()
        if table is None:
            return self._reply(HTTPStatus.NO_CONTENT, b"")
        self._reply(HTTPStatus.OK, arrow_bytes(table), ARROW_STREAM)


class _QueryServer(ThreadingHTTPServer):
    # Handler threads are joined when the server closes: a daemon thread still inside DuckDB or Arrow when
    # the interpreter finalizes aborts the whole process ("PyGILState_Release ... finalizing", SIGABRT), so
    # a stage that had finished its work would exit -6.
    daemon_threads = False
    block_on_close = True

    def __init__(self, addr: tuple[str, int], db_path: Path, token: str, command: str) -> None:
        super().__init__(addr, _Handler)
        self.db_path, self.token, self.command = db_path, token, command
        self._queries: set[duckdb.DuckDBPyConnection] = set()
        self._idle = threading.Condition()

    def begin_query(self, con: duckdb.DuckDBPyConnection) -> None:
        with self._idle:
            self._queries.add(con)

    def end_query(self, con: duckdb.DuckDBPyConnection) -> None:
        with self._idle:
            self._queries.discard(con)
            self._idle.notify_all()

    def running_queries(self) -> int:
        with self._idle:
            return len(self._queries)

    def finish_queries(self, grace_s: float) -> None:
        """Let running queries finish for ``grace_s``; interrupt what still runs (its client gets an error)."""
        with self._idle:
            if self._idle.wait_for(lambda: not self._queries, timeout=grace_s):
                return
            for con in list(self._queries):
                with contextlib.suppress(duckdb.Error):
                    con.interrupt()


def _write_advert(path: Path, advert: dict) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(advert, f)
    os.replace(tmp, path)  # readers never see half an advertisement


def _remove_advert(path: Path, token: str) -> None:
    with contextlib.suppress(FileNotFoundError, ValueError, OSError):
        if json.loads(path.read_text()).get("token") == token:  # a later command may own it now
            path.unlink()


@contextlib.contextmanager
def serve_readers(
    db_path: str | Path,
    host: str = "127.0.0.1",
    port: int = 0,
    command: str = "",
    grace_s: float = QUERY_GRACE_S,
) -> Iterator[dict]:
    """Serve read-only queries on ``db_path`` for the duration of the block; yields the advertisement.

    When the block ends, queries still running get ``grace_s`` to finish, then are interrupted, and every
    handler thread is joined before the block returns.
    """
    db_path = Path(db_path).resolve()
    db_path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(16)
    server = _QueryServer((host, port), db_path, token, command)
    thread = threading.Thread(target=server.serve_forever, name="query-server", daemon=True)
    thread.start()
    advert = {
        "pid": os.getpid(),
        # bound to every interface: advertise a name analysts on other machines can reach
        "host": socket.gethostname() if host in ("0.0.0.0", "") else host,
        "port": server.server_address[1],
        "token": token,
        "command": command,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    path = advert_path(db_path)
    _write_advert(path, advert)
    try:
        yield advert
    finally:
        _remove_advert(path, token)
        server.shutdown()  # no new requests
        server.finish_queries(grace_s)
        server.server_close()  # joins the handler threads
        thread.join(timeout=5)
