"""Benchmark: generate a large synthetic room and save it to DuckDB; rubric size at 2,000 documents.

    python tests/bench/bench_rooms.py [--documents 5000 --tokens-per-document 16000]

Times pipeline.rooms.synthetic.generator.generate_room (which includes probe sampling)
and pipeline.rooms.store.save_room into a fresh DuckDB file, and reports the
peak resident memory of the process. Targets: a 5,000-document, ~80M-token
room generated and saved in at most 120 s and at most 4 GiB peak RSS; a
2,000-document room carries several hundred criteria.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from pipeline import db
from pipeline.rooms.store import save_room
from pipeline.rooms.synthetic.generator import generate_room

TARGET_S = 120.0
TARGET_RSS_GIB = 4.0


def peak_rss_gib() -> float:
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return kib / 1024**2 if sys.platform != "darwin" else kib / 1024**3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--documents", type=int, default=5000)
    ap.add_argument("--tokens-per-document", type=int, default=16000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    small = generate_room("bench-2000", seed=args.seed, n_documents=2000, tokens_per_document=200)
    kinds = Counter(c.kind for c in small.criteria)
    issues = len({c.issue_id for c in small.criteria if not c.is_trap})
    print(f"2,000-document room: {len(small.criteria)} criteria from {issues} issues; by kind {dict(kinds)}")
    del small

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        room = generate_room(
            "bench-big",
            seed=args.seed,
            n_documents=args.documents,
            tokens_per_document=args.tokens_per_document,
        )
        t1 = time.perf_counter()
        con = db.connect(Path(tmp) / "bench.duckdb")
        save_room(con, room)
        con.close()
        t2 = time.perf_counter()
        size_mb = (Path(tmp) / "bench.duckdb").stat().st_size / 1e6
        n_tokens = room.n_tokens
        docs_with_probe = len({p.path for p in room.probes})
        print(
            f"room: {len(room.documents):,} documents, {n_tokens / 1e6:.1f}M tokens "
            f"({n_tokens / len(room.documents):,.0f} per document), {len(room.criteria)} criteria, "
            f"{len(room.probes):,} probes ({docs_with_probe:,} documents with a probe), {len(room.folders)} folders"
        )
        total = t2 - t0
        rss = peak_rss_gib()
        print(
            f"generate {t1 - t0:6.1f} s   save {t2 - t1:6.1f} s   total {total:6.1f} s   target {TARGET_S:.0f} s   "
            f"ratio {total / TARGET_S:.2f}"
        )
        print(
            f"peak RSS {rss:6.2f} GiB   target {TARGET_RSS_GIB:.0f} GiB   ratio {rss / TARGET_RSS_GIB:.2f}   "
            f"duckdb file {size_mb:,.0f} MB"
        )


if __name__ == "__main__":
    main()
