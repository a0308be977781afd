"""Benchmark: coverage scanning speed against the probes of a 5,000-document room.

    python tests/bench/bench_coverage.py [--documents 5000 --tokens 16000 --input-mb 200]

Generates the room with the real generator (about 160k probes), builds model
inputs from its documents the way subagent prompts carry them (a header line
then the text, some cut mid-document), and times ProbeIndex.seen over them.
Prints MB/s (target >= 100 MB/s) and, side by side, the same input scanned
against a tenth of the probes, to show the cost does not grow with the probe
count.
"""

from __future__ import annotations

import argparse
import random
import time

from pipeline.rooms.probes import ProbeIndex
from pipeline.rooms.synthetic.generator import generate_room


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--documents", type=int, default=5000)
    ap.add_argument("--tokens", type=int, default=16000)
    ap.add_argument("--input-mb", type=float, default=200.0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    room = generate_room("bench-coverage", 1, n_documents=args.documents, tokens_per_document=args.tokens)
    print(
        f"room: {len(room.documents):,} documents, {room.n_tokens:,} tokens, {len(room.probes):,} probes "
        f"(generated in {time.perf_counter() - t0:.1f} s)"
    )
    rng = random.Random(0)
    inputs, size = [], 0
    while size < args.input_mb * 1e6:
        d = rng.choice(room.documents)
        text = d.text if rng.random() < 0.7 else d.text[: len(d.text) // 2]
        prompt = f"List the diligence risks.\n=== {d.path} ===\n{text}"
        inputs.append(prompt)
        size += len(prompt)
    for share in (1.0, 0.1):
        probes = room.probes if share == 1.0 else room.probes[:: int(1 / share)]
        index = ProbeIndex(probes)
        t0 = time.perf_counter()
        seen = index.seen(inputs)
        dt = time.perf_counter() - t0
        print(
            f"{len(probes):>8,} probes: scanned {size / 1e6:,.0f} MB in {dt:.2f} s = {size / 1e6 / dt:,.0f} MB/s, "
            f"{len(seen):,} probes seen (target >= 100 MB/s)"
        )


if __name__ == "__main__":
    main()
