"""Which synthetic rooms a recipe asks for, and generating the ones the warehouse lacks."""

from __future__ import annotations

import random

import duckdb
from tqdm import tqdm

from pipeline.config import PipelineConfig
from pipeline.rooms import store
from pipeline.rooms.split import assign_splits
from pipeline.rooms.synthetic.generator import generate_room


def room_plan(cfg: PipelineConfig) -> list[tuple[str, int, str, int]]:
    """(name, seed, split, n_documents) of every room the recipe asks for.

    Sizes spread evenly over n_documents * [1 - size_spread, 1 + size_spread]
    (in a seeded order), so rooms differ in size and the correlation between
    delegation and room size means something.
    """
    r = cfg.rooms
    names = [f"{r.name_prefix}-{i:03d}" for i in range(r.n_rooms)]
    splits = assign_splits(names, r.heldout_fraction)
    steps = [(-1 + 2 * i / (r.n_rooms - 1)) if r.n_rooms > 1 else 0.0 for i in range(r.n_rooms)]
    random.Random(r.seed).shuffle(steps)
    sizes = [max(1, round(r.n_documents * (1 + r.size_spread * s))) for s in steps]
    return [(n, r.seed * 1000 + i, splits[n], sizes[i]) for i, n in enumerate(names)]


def generate_missing(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig) -> dict[str, int]:
    """Generate the planned rooms not in the warehouse yet, each saved in its own transaction."""
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
    return {"generated": len(plan), "kept": len(existing), "total": len(existing) + len(plan)}
