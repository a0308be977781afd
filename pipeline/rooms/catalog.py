"""A stored room for people: its folder tree as text, or its documents and rubric as files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from pipeline.rooms.model import Room


def describe(room: Room) -> str:
    """Folder tree with document counts and tokens, then rubric kinds."""
    lines = [
        f"room {room.name} ({room.source}, {room.split})",
        f"target: {json.dumps(room.target)}",
        f"deal:   {json.dumps(room.deal)}",
        f"{len(room.documents)} documents, {room.n_tokens:,} tokens, {len(room.folders)} folders",
        "",
    ]
    per_folder: dict[str, list[int]] = {}
    for d in room.documents:
        per_folder.setdefault(d.folder, []).append(d.n_tokens)
    for folder in sorted(per_folder):
        depth = folder.count("/")
        toks = sum(per_folder[folder])
        lines.append(
            f"{'  ' * depth}{folder.rsplit('/', 1)[-1]}/  {len(per_folder[folder])} docs, {toks:,} tokens"
        )
    kinds = Counter(c.kind for c in room.criteria)
    lines += ["", f"rubric: {len(room.criteria)} criteria"] + [
        f"  {k:10s} {n}" for k, n in sorted(kinds.items())
    ]
    lines.append(f"probes: {len(room.probes)}")
    return "\n".join(lines)


def export_files(room: Room, out: Path) -> Path:
    """Documents as files under out/<room>/, rubric as rubric.jsonl (the import format)."""
    base = out / room.name
    for d in room.documents:
        p = base / "documents" / d.path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(d.text)
    with (base / "rubric.jsonl").open("w") as f:
        for c in room.criteria:
            row = {"criterion_id": c.criterion_id, "kind": c.kind, "text": c.text, "is_trap": c.is_trap}
            row.update(c.spec())
            f.write(json.dumps(row) + "\n")
    return base
