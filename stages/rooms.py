"""Stage `rooms`: put data rooms into the warehouse.

    python -m pipeline --recipe tiny rooms generate          # rooms.n_rooms synthetic rooms
    python -m pipeline rooms import path/to/folder --name acme [--rubric rubric.yaml]
    python -m pipeline rooms cuad ../shared/data --n-rooms 2
    python -m pipeline rooms list | show <name> | export <name> <out-folder>

Generation is deterministic (room i uses seed rooms.seed*1000+i) and
idempotent: rooms already in the warehouse are kept, missing ones are added,
each in its own transaction. Splits follow pipeline.rooms.split.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from tqdm import tqdm

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.rooms import store


def room_plan(cfg: PipelineConfig) -> list[tuple[str, int, str, int]]:
    """(name, seed, split, n_documents) of every room the recipe asks for.

    Sizes spread evenly over n_documents * [1 - size_spread, 1 + size_spread]
    (in a seeded order), so rooms differ in size and the correlation between
    delegation and room size means something.
    """
    import random

    from pipeline.rooms.split import assign_splits

    r = cfg.rooms
    names = [f"{r.name_prefix}-{i:03d}" for i in range(r.n_rooms)]
    splits = assign_splits(names, r.heldout_fraction)
    steps = [(-1 + 2 * i / (r.n_rooms - 1)) if r.n_rooms > 1 else 0.0 for i in range(r.n_rooms)]
    random.Random(r.seed).shuffle(steps)
    sizes = [max(1, round(r.n_documents * (1 + r.size_spread * s))) for s in steps]
    return [(n, r.seed * 1000 + i, splits[n], sizes[i]) for i, n in enumerate(names)]


def run(cfg: PipelineConfig) -> dict:
    """Generate the recipe's synthetic rooms that are not in the warehouse yet."""
    from pipeline.rooms.generator import generate_room

    con = db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)
    with db.stage_run(con, "rooms", cfg.hash("rooms")) as counts:
        existing = set(store.room_names(con))
        plan = [p for p in room_plan(cfg) if p[0] not in existing]
        for name, seed, split, n_documents in tqdm(plan, desc="rooms", unit="room", disable=not plan):
            room = generate_room(
                name,
                seed,
                n_documents=n_documents,
                tokens_per_document=cfg.rooms.tokens_per_document,
                decoys=cfg.rooms.decoys,
                split=split,
            )
            store.save_room(con, room)
        counts.update(generated=len(plan), kept=len(existing), total=len(existing) + len(plan))
    con.close()
    return counts


def cli(cfg: PipelineConfig, args: argparse.Namespace) -> int:
    action = args.action
    if action == "generate":
        run(cfg)
        return 0
    con = db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)
    try:
        if action == "import":
            from pipeline.rooms.importer import import_folder

            room, report = import_folder(args.folder, args.name, rubric_path=args.rubric, split=args.split)
            with db.stage_run(con, "rooms", cfg.hash("rooms"), f"import {args.folder}") as counts:
                store.save_room(con, room)
                counts.update(
                    imported=len(room.documents), skipped=len(report.skipped), warnings=len(report.warnings)
                )
            print(report.summary())
            print(
                f"imported room {room.name}: {len(room.documents)} documents, {len(room.criteria)} criteria"
            )
        elif action == "cuad":
            from pipeline.rooms.cuad import build_cuad_rooms

            rooms = build_cuad_rooms(
                args.corpus, n_rooms=args.n_rooms, contracts_per_room=args.contracts_per_room
            )
            existing = set(store.room_names(con))
            with db.stage_run(con, "rooms", cfg.hash("rooms"), f"cuad {args.corpus}") as counts:
                added = 0
                for room in tqdm(rooms, desc="cuad rooms", unit="room"):
                    if room.name not in existing:
                        store.save_room(con, room)
                        added += 1
                counts.update(added=added, kept=len(rooms) - added)
            print(f"{added} CUAD rooms added, {len(rooms) - added} already present")
        elif action == "list":
            from pipeline.sqlcli import show

            show(con, "select name, source, split, n_documents, n_tokens from rooms order by name")
        elif action == "show":
            print(describe(store.load_room(con, args.name)))
        elif action == "export":
            out = export_files(store.load_room(con, args.name), Path(args.out))
            print(f"wrote {out}")
    finally:
        con.close()
    return 0


def describe(room) -> str:
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


def export_files(room, out: Path) -> Path:
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
