"""Rooms in the warehouse: write one room in one transaction, read it back."""

from __future__ import annotations

import json

import duckdb
import pyarrow as pa

from pipeline import db
from pipeline.rooms.model import Criterion, Document, Probe, Room


class RoomError(ValueError):
    """A room that cannot be stored as given (the message names the file/row)."""

    user_facing = True  # the CLI prints the message as one line


def validate(room: Room, source: str = "") -> None:
    where = source or room.name
    if not room.documents:
        raise RoomError(f"{where}: room {room.name!r} has no documents")
    seen: set[str] = set()
    for d in room.documents:
        if d.path in seen:
            raise RoomError(f"{where}: duplicate document path {d.path!r}")
        seen.add(d.path)
    ids: set[str] = set()
    for c in room.criteria:
        if c.criterion_id in ids:
            raise RoomError(f"{where}: duplicate criterion id {c.criterion_id!r}")
        ids.add(c.criterion_id)


def save_room(con: duckdb.DuckDBPyConnection, room: Room, replace: bool = False) -> None:
    """Write the room, its documents, criteria and probes: all of it or nothing."""
    validate(room)
    exists = con.execute("select count(*) from rooms where name = ?", [room.name]).fetchone()[0]
    if exists and not replace:
        raise RoomError(f"room {room.name!r} already exists (use replace)")
    rid = room.room_id
    docs = pa.table(
        {
            "room_id": [rid] * len(room.documents),
            "path": [d.path for d in room.documents],
            "folder": [d.folder for d in room.documents],
            "category": [d.category for d in room.documents],
            "title": [d.title for d in room.documents],
            "doc_kind": [d.doc_kind for d in room.documents],
            "text": [d.text for d in room.documents],
            "n_tokens": pa.array([d.n_tokens for d in room.documents], pa.int32()),
        }
    )
    crit = pa.table(
        {
            "room_id": [rid] * len(room.criteria),
            "criterion_id": [c.criterion_id for c in room.criteria],
            "kind": [c.kind for c in room.criteria],
            "issue_id": [c.issue_id for c in room.criteria],
            "issue_kind": [c.issue_kind for c in room.criteria],
            "text": [c.text for c in room.criteria],
            "spec": [json.dumps(c.spec()) for c in room.criteria],
            "is_trap": [c.is_trap for c in room.criteria],
        }
    )
    probes = pa.table(
        {
            "room_id": [rid] * len(room.probes),
            "probe_id": pa.array([p.probe_id for p in room.probes], pa.int32()),
            "path": [p.path for p in room.probes],
            "char_offset": pa.array([p.char_offset for p in room.probes], pa.int32()),
            "text": [p.text for p in room.probes],
        }
    )
    with db.transaction(con):
        if exists:
            for t in ("documents", "criteria", "probes", "rooms"):
                con.execute(f"delete from {t} where room_id = ?", [rid])
        db.write_rows(
            con,
            "rooms",
            [
                {
                    "room_id": rid,
                    "name": room.name,
                    "source": room.source,
                    "split": room.split,
                    "seed": room.seed,
                    "target": room.target,
                    "deal": room.deal,
                    "n_documents": len(room.documents),
                    "n_tokens": room.n_tokens,
                    "created_at": db.now(),
                    "claim_labels": room.claim_labels or None,
                }
            ],
        )
        db.write_arrow(con, "documents", docs)
        db.write_arrow(con, "criteria", crit)
        db.write_arrow(con, "probes", probes)


def room_names(con: duckdb.DuckDBPyConnection, split: str | None = None) -> list[str]:
    if split:
        rows = con.execute("select name from rooms where split = ? order by name", [split]).fetchall()
    else:
        rows = con.execute("select name from rooms order by name").fetchall()
    return [r[0] for r in rows]


def load_room(con: duckdb.DuckDBPyConnection, name: str, with_text: bool = True) -> Room:
    meta = db.fetch_dicts(con, "select * from rooms where name = ?", [name])
    if not meta:
        raise RoomError(f"no room named {name!r} in the warehouse")
    m = meta[0]
    text_col = "text" if with_text else "'' as text"
    docs = [
        Document(path=r[0], category=r[1], title=r[2], doc_kind=r[3], text=r[4])
        for r in con.execute(
            f"select path, category, title, doc_kind, {text_col} from documents where room_id = ? order by path",
            [m["room_id"]],
        ).fetchall()
    ]
    crits = [
        Criterion.from_row(r, json.loads(r["spec"]))
        for r in db.fetch_dicts(
            con, "select * from criteria where room_id = ? order by criterion_id", [m["room_id"]]
        )
    ]
    probes = [
        Probe(probe_id=r[0], path=r[1], char_offset=r[2], text=r[3])
        for r in con.execute(
            "select probe_id, path, char_offset, text from probes where room_id = ? order by probe_id",
            [m["room_id"]],
        ).fetchall()
    ]
    return Room(
        name=m["name"],
        target=json.loads(m["target"]),
        deal=json.loads(m["deal"]),
        documents=docs,
        criteria=crits,
        probes=probes,
        source=m["source"],
        split=m["split"],
        seed=m["seed"],
        claim_labels=json.loads(m["claim_labels"]) if m.get("claim_labels") else {},
    )
