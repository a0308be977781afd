"""Export a room to plain files the sandbox worker can map, so workers never open the warehouse.

DuckDB allows one writing process, and the REPL worker runs hostile code, so
the worker gets the room as two files instead: ``texts.bin`` (every
document's UTF-8 text, concatenated in path order) and ``index.json`` (room
metadata and, per document, path, folder, category, title, doc_kind,
n_tokens and the byte offset and length of its text). pipeline.harness.room_view
reads them.

Exporting is idempotent: ``index.json`` carries a hash of the room's content
and is written last, so a folder whose index holds the same hash (and whose
texts.bin has the recorded size) is complete and is left alone; a killed
export leaves no index and is redone.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from pipeline.harness.room_view import FORMAT_VERSION, INDEX_FILE, TEXTS_FILE
from pipeline.rooms.model import Room, count_tokens


def room_content_hash(room: Room) -> str:
    """SHA-256 over everything the worker sees of the room (metadata and every document)."""
    # Streamed, not pipeline.ids.digest: a room can be gigabytes, never joined into one string.
    h = hashlib.sha256()
    head = {"format": FORMAT_VERSION, "name": room.name, "target": room.target, "deal": room.deal}
    h.update(json.dumps(head, sort_keys=True, default=str).encode())
    for d in sorted(room.documents, key=lambda d: d.path):
        meta = json.dumps([d.path, d.category, d.title, d.doc_kind], ensure_ascii=False).encode()
        text = d.text.encode("utf-8")
        # Lengths frame each part so no two different rooms hash the same bytes.
        h.update(len(meta).to_bytes(8, "big") + meta + len(text).to_bytes(8, "big"))
        h.update(text)
    return h.hexdigest()


def _is_current(out_dir: Path, digest: str) -> bool:
    try:
        meta = json.loads((out_dir / INDEX_FILE).read_text(encoding="utf-8"))
        return meta.get("content_hash") == digest and (out_dir / TEXTS_FILE).stat().st_size == meta.get(
            "texts_bytes"
        )
    except (OSError, ValueError, AttributeError):
        return False


def export_room(room: Room, out_dir: Path) -> Path:
    """Write ``room`` to ``out_dir`` (texts.bin + index.json) unless it is already there; return ``out_dir``."""
    out_dir = Path(out_dir)
    paths = [d.path for d in room.documents]
    if len(set(paths)) != len(paths):
        dup = next(p for p in paths if paths.count(p) > 1)
        raise ValueError(f"room {room.name!r}: duplicate document path {dup!r}")
    digest = room_content_hash(room)
    if _is_current(out_dir, digest):
        return out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    index_path = out_dir / INDEX_FILE
    index_path.unlink(missing_ok=True)  # the index is the commit marker: drop it before touching texts
    tmp_texts = out_dir / (TEXTS_FILE + ".tmp")
    entries = []
    offset = 0
    with open(tmp_texts, "wb") as f:
        for d in sorted(room.documents, key=lambda d: d.path):
            b = d.text.encode("utf-8")
            f.write(b)
            entries.append(
                {
                    "path": d.path,
                    "folder": d.folder,
                    "category": d.category,
                    "title": d.title,
                    "doc_kind": d.doc_kind,
                    "n_tokens": count_tokens(d.text),
                    "offset": offset,
                    "length": len(b),
                }
            )
            offset += len(b)
    os.replace(tmp_texts, out_dir / TEXTS_FILE)
    meta = {
        "format": FORMAT_VERSION,
        "content_hash": digest,
        "name": room.name,
        "target": room.target,
        "deal": room.deal,
        "folders": sorted({e["folder"] for e in entries}),
        "n_documents": len(entries),
        "n_tokens": sum(e["n_tokens"] for e in entries),
        "texts_bytes": offset,
        "documents": entries,
    }
    tmp_index = out_dir / (INDEX_FILE + ".tmp")
    tmp_index.write_text(json.dumps(meta, ensure_ascii=False, default=str), encoding="utf-8")
    os.replace(tmp_index, index_path)
    return out_dir
