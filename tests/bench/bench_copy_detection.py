"""Benchmark: reference-grader throughput with the near-copy check, beside the exact check alone.

    python tests/bench/bench_copy_detection.py [--rooms 20,5000] [--seconds 2] [--seed 0]

For each generated room size, builds the room, draws its known-answer memos
(pipeline.grading.known_answers: empty, oracle, dump, dump_phrases,
claim_all, and the adversarial near_copy, claim_stuffing, wrong_citation,
repetition, paraphrase), and grades each memo in a loop for about
``--seconds`` with two graders over the same room:

- ``exact``: ``ReferenceGrader(room, near_copies=False)``, quotation read as
  grader version 2 read it (verbatim 8-grams only);
- ``near``: ``ReferenceGrader(room)``, the default (version 3): exact
  8-grams plus the near-copy check.

Printed: the index build time of each, then per memo its words, memos/s of
each grader side by side and the ratio, and the headline each gives (the
near copy is where they part); last, memos/s over the whole mix (every memo
once, in turn). Memos longer than the reading budget are read only to the
budget, as in grading. No target: the figures go in the report.
"""

from __future__ import annotations

import argparse
import time

from pipeline.grading.known_answers import known_memos
from pipeline.grading.reference import ReferenceGrader
from pipeline.rooms.synthetic.generator import generate_room


def rate(grader: ReferenceGrader, memos: list[str], seconds: float) -> float:
    """Memos graded per second, grading ``memos`` in turn for at least ``seconds`` (and once each)."""
    n, t0 = 0, time.perf_counter()
    while True:
        for m in memos:
            grader.grade(m)
            n += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return n / elapsed


def bench_room(n_documents: int, seconds: float, seed: int) -> None:
    t0 = time.perf_counter()
    room = generate_room(f"bench-copy-{n_documents}", seed, n_documents=n_documents)
    words = sum(len(d.text.split()) for d in room.documents)
    print(
        f"\n== generated room: {n_documents:,} documents, {words:,} words "
        f"(generated in {time.perf_counter() - t0:.1f} s)"
    )
    graders = {}
    for name, near in (("exact", False), ("near", True)):
        t0 = time.perf_counter()
        graders[name] = ReferenceGrader(room, near_copies=near)
        print(f"index {name:5s}: {time.perf_counter() - t0:6.2f} s")
    memos = known_memos(room, seed=seed)
    budget = graders["near"].budget_words
    print(f"reading budget: {budget:,} words")
    print(
        f"{'memo':16s} {'words':>10s} {'exact/s':>9s} {'near/s':>9s} {'near/exact':>10s}  headline exact -> near"
    )
    each = max(0.2, seconds / len(memos))
    for name, memo in memos.items():
        r_exact = rate(graders["exact"], [memo], each)
        r_near = rate(graders["near"], [memo], each)
        h_exact = graders["exact"].grade(memo).headline
        h_near = graders["near"].grade(memo).headline
        print(
            f"{name:16s} {len(memo.split()):10,d} {r_exact:9.1f} {r_near:9.1f} {r_near / r_exact:10.2f}"
            f"  {h_exact:.3f} -> {h_near:.3f}"
        )
    mix = list(memos.values())
    r_exact = rate(graders["exact"], mix, seconds)
    r_near = rate(graders["near"], mix, seconds)
    print(f"{'all (mix)':16s} {'':10s} {r_exact:9.1f} {r_near:9.1f} {r_near / r_exact:10.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--rooms", default="20,5000", help="document counts of the generated rooms, comma-separated"
    )
    ap.add_argument("--seconds", type=float, default=2.0, help="grading time per grader and room (about)")
    ap.add_argument("--seed", type=int, default=0, help="room and adversarial-memo seed")
    args = ap.parse_args()
    for n in (int(x) for x in args.rooms.split(",")):
        bench_room(n, args.seconds, args.seed)


if __name__ == "__main__":
    main()
