"""Benchmark: the program-check ladder on a recipe's rooms, a room's rungs one at a time vs side by side.

Every `make distill` and `make rl` scores the ladder on the rooms that lack it (pipeline.grading.
program_check.record_ladder): 7 reference programs per room, each through the real harness (its own
REPL worker) and the extractive reader. This generates rooms as the default recipe does (sizes 20-300
documents), runs the ladder on them with ``concurrency`` 1 and ``LADDER_CONCURRENCY`` in one run, prints
both times and their ratio, and checks that both give the same rows.

Run: python tests/bench/bench_ladder.py [--rooms 8]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from pipeline.config import load_config
from pipeline.grading.program_check import LADDER_CONCURRENCY, run_ladder
from pipeline.llm.base import make_backend
from pipeline.rooms.synthetic.generator import generate_room


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rooms", type=int, default=8)
    args = ap.parse_args()
    cfg = load_config("default")
    sizes = [round(20 + (300 - 20) * i / max(1, args.rooms - 1)) for i in range(args.rooms)]
    rooms = [
        ("bench", generate_room(f"bench-{i}", seed=9000 + i, n_documents=n)) for i, n in enumerate(sizes)
    ]
    sub = make_backend(cfg.models.subagent)
    times, results = {}, {}
    for concurrency in (1, LADDER_CONCURRENCY):
        t0 = time.perf_counter()
        results[concurrency] = asyncio.run(run_ladder(rooms, sub, cfg.harness, concurrency=concurrency))
        times[concurrency] = time.perf_counter() - t0
    cores = os.cpu_count()
    print(f"ladder on {args.rooms} rooms of {sizes[0]}-{sizes[-1]} documents, {cores} cores:")
    for c, t in times.items():
        print(f"  concurrency {c}: {t:.1f} s ({t / args.rooms:.2f} s per room)")
    print(f"  speed-up x{times[1] / times[LADDER_CONCURRENCY]:.2f}")
    same = [(r.rung, r.room, r.headline, r.status) for r in results[1]] == [
        (r.rung, r.room, r.headline, r.status) for r in results[LADDER_CONCURRENCY]
    ]
    print(f"  same rows: {same}")
    if not same:
        raise SystemExit("the concurrent ladder's rows differ from the sequential ones")


if __name__ == "__main__":
    main()
