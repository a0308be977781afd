"""Benchmark: the program-check ladder on a recipe's rooms, a room's rungs one at a time vs side by side.

Every `make distill` and `make rl` scores the ladder on the rooms that lack it (pipeline.grading.
program_check.record_ladder): 7 reference programs per room, each through the real harness (its own
REPL worker) and the extractive reader. This generates rooms as the default recipe does (sizes 20-300
documents), runs the ladder on them with ``concurrency`` 1 and ``LADDER_CONCURRENCY``, the reader
reading every block afresh, then at ``LADDER_CONCURRENCY`` with the reader remembering what it read
(pipeline.llm.extractive._cached_findings), in one run; prints the times and their ratios, and checks
that all three give the same rows.

Run: python tests/bench/bench_ladder.py [--rooms 8]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from pipeline.config import load_config
from pipeline.grading.program_check import LADDER_CONCURRENCY, run_ladder
from pipeline.llm import extractive
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
    remembered = extractive._cached_findings

    def afresh(path, text, terms, exclude, max_findings):  # the reader without its memory
        return tuple(
            extractive.block_findings(extractive.Block(path, text), set(terms), exclude, max_findings)
        )

    runs = {
        "one rung at a time": (1, afresh),
        f"{LADDER_CONCURRENCY} rungs side by side": (LADDER_CONCURRENCY, afresh),
        f"{LADDER_CONCURRENCY} side by side, the reader remembering": (LADDER_CONCURRENCY, remembered),
    }
    times, results = {}, {}
    for name, (concurrency, reader) in runs.items():
        remembered.cache_clear()  # each run reads the rooms afresh
        extractive._cached_findings = reader
        t0 = time.perf_counter()
        results[name] = asyncio.run(run_ladder(rooms, sub, cfg.harness, concurrency=concurrency))
        times[name] = time.perf_counter() - t0
    extractive._cached_findings = remembered
    cores = os.cpu_count()
    print(f"ladder on {args.rooms} rooms of {sizes[0]}-{sizes[-1]} documents, {cores} cores:")
    first = next(iter(times))
    for name, t in times.items():
        print(f"  {name}: {t:.1f} s ({t / args.rooms:.2f} s per room), speed-up x{times[first] / t:.2f}")
    rows = {name: [(r.rung, r.room, r.headline, r.status) for r in res] for name, res in results.items()}
    same = all(r == rows[first] for r in rows.values())
    print(f"  same rows: {same}")
    if not same:
        raise SystemExit("the ladder's rows differ between the runs")


if __name__ == "__main__":
    main()
