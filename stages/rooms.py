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
from contextlib import closing
from pathlib import Path

from tqdm import tqdm

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.rooms import store
from pipeline.rooms.catalog import describe, export_files
from pipeline.rooms.synthetic.plan import generate_missing


def run(cfg: PipelineConfig) -> dict:
    """Generate the recipe's synthetic rooms that are not in the warehouse yet."""
    with closing(db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)) as con:
        with db.stage_run(con, "rooms", cfg.hash("rooms")) as counts:
            counts.update(generate_missing(con, cfg))
        return counts


def cli(cfg: PipelineConfig, args: argparse.Namespace) -> int:
    action = args.action
    if action == "generate":
        run(cfg)
        return 0
    con = db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)
    try:
        if action == "import":
            from pipeline.rooms.imported.folder import import_folder

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

            show(
                con.sql(
                    "select name, source, split, n_documents, n_tokens from rooms order by name"
                ).to_arrow_table()
            )
        elif action == "show":
            print(describe(store.load_room(con, args.name)))
        elif action == "export":
            out = export_files(store.load_room(con, args.name), Path(args.out))
            print(f"wrote {out}")
    finally:
        con.close()
    return 0
