"""Ask the warehouse a question without getting in a running command's way.

``query`` goes, in order:
1. to the query server of the command that holds the file, when
   ``<db>.readers.json`` names a live one (see pipeline.query_server): the
   answer comes from that process, and nothing here touches the lock;
2. otherwise to the file itself, opened read-only for this one statement and
   closed straight after (so an idle shell holds no lock), waiting briefly
   while a writer without a server holds it.

Writing (``write=True``, `pipeline sql --write`) always opens the file
read-write, waiting for the lock like a stage does.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import requests

from pipeline import db
from pipeline.query_server import ARROW_STREAM, advert_path, to_table

READ_WAIT_S = 30.0


class QueryError(RuntimeError):
    """A query that could not be answered; the message says why in one line."""

    user_facing = True


def read_advert(db_path: str | Path) -> dict | None:
    try:
        advert = json.loads(advert_path(db_path).read_text())
    except (FileNotFoundError, ValueError, OSError):
        return None
    return advert if {"host", "port", "token"} <= set(advert) else None


def via_server(advert: dict, sql: str, timeout_s: float = 600.0) -> pa.Table | None:
    """Send ``sql`` to a command's query server; raises requests.ConnectionError when it is gone."""
    url = f"http://{advert['host']}:{advert['port']}/query"
    r = requests.post(url, json={"sql": sql, "token": advert["token"]}, timeout=(2.0, timeout_s))
    if r.status_code == 204:
        return None
    if r.headers.get("Content-Type") == ARROW_STREAM and r.ok:
        return pa.ipc.open_stream(r.content).read_all()
    try:
        message = r.json()["error"]
    except (ValueError, KeyError):
        message = r.text[:500]
    if r.status_code == 503:  # the server could not open the file (another process holds it)
        raise requests.ConnectionError(message)
    raise QueryError(
        f"{message} (answered by PID {advert.get('pid')}: {advert.get('command') or 'a command'})"
    )


def from_file(db_path: Path, sql: str, write: bool = False, wait_s: float = READ_WAIT_S) -> pa.Table | None:
    if write:
        con = db.connect(db_path, lock_timeout_s=wait_s)
    else:
        con = db.open_file(db_path, read_only=True, lock_timeout_s=wait_s)
    try:
        rel = con.sql(sql)
        return None if rel is None else to_table(rel)
    except duckdb.Error as exc:
        raise QueryError(str(exc)) from None
    finally:
        con.close()


def query(
    db_path: str | Path, sql: str, *, write: bool = False, wait_s: float = READ_WAIT_S
) -> pa.Table | None:
    """The last statement's result as an Arrow table (None for statements without one)."""
    db_path = Path(db_path)
    if not write and (advert := read_advert(db_path)):
        try:
            return via_server(advert, sql)
        except requests.ConnectionError:
            pass  # that command has ended (or died): the file is free, or its next holder is
        except requests.Timeout:
            raise QueryError(f"no answer from the query server of PID {advert.get('pid')} in time") from None
    if not db_path.exists():
        raise QueryError(f"no warehouse at {db_path} (run a stage first, or pass run.dir=...)")
    return from_file(db_path, sql, write, wait_s)
