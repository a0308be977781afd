"""Benchmark: the extractive reader's risk patterns, searched in full against through their literal stems.

    python tests/bench/bench_risk_patterns.py [--documents 30 --tokens 60000]

Splits a generated room (pipeline.rooms.synthetic) into sentences as the
reader does and scores each against every risk pattern twice, side by side:
plain ``re.search`` of each pattern, and ``Prefiltered.search``
(pipeline.llm.literal_stems: the regex runs only where one of the pattern's
literal stems occurs). Prints both times, their ratio, and whether the two
gave the same score for every sentence (they must).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pipeline.llm.extractive import RISK_PATTERNS, split_sentences  # noqa: E402
from pipeline.rooms.synthetic.generator import generate_room  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--documents", type=int, default=30)
    ap.add_argument("--tokens", type=int, default=60_000, help="tokens per document")
    args = ap.parse_args()
    room = generate_room("bench-risk", seed=3, n_documents=args.documents, tokens_per_document=args.tokens)
    sentences = [s for d in room.documents for s in split_sentences(d.text)]
    plain = [(re.compile(rx.regex.pattern, re.IGNORECASE), w) for rx, w in RISK_PATTERNS]

    t0 = time.perf_counter()
    full = [sum(w for rx, w in plain if rx.search(s)) for s in sentences]
    t_full = time.perf_counter() - t0
    t0 = time.perf_counter()
    pre = [
        sum(w for rx, w in RISK_PATTERNS if rx.search(s, s.lower() if s.isascii() else None))
        for s in sentences
    ]
    t_pre = time.perf_counter() - t0

    hit = sum(1 for x in full if x) / len(full)
    print(f"{len(sentences)} sentences of {args.documents} documents; {hit:.1%} match any risk pattern")
    print(f"{'search':24s} {'seconds':>8s}")
    print(f"{'re.search, every pattern':24s} {t_full:8.2f}")
    print(f"{'literal stems first':24s} {t_pre:8.2f}")
    print(f"stems / plain: {t_pre / t_full:.2f}x; same score for every sentence: {full == pre}")
    return 0 if full == pre else 1


if __name__ == "__main__":
    sys.exit(main())
