"""Benchmark: reference-grader throughput, the grader before the near-copy check (old) beside this one (new).

    python tests/bench/bench_copy_detection.py [--rooms 20,5000] [--seconds 2] [--seed 0] [--old main]

For each generated room size, builds the room, draws its known-answer memos
(pipeline.grading.known_answers: empty, oracle, dump, dump_phrases,
claim_all, and the adversarial near_copy, claim_stuffing, wrong_citation,
repetition, paraphrase) and grades each memo in a loop for about
``--seconds`` with two graders over the same room:

- ``old``: the reference grader of git revision ``--old`` (``main``: grader
  version 2, verbatim 8-grams only), run from ``git archive`` of that
  revision in a child process, since both are the package ``pipeline``;
- ``new``: the reference grader of this tree (version 3: exact 8-grams plus
  the near-copy check, citations, repeats), in a child process the same way.

The room is generated in each process from the same seed (the generator is
the same in both trees; the room's word count is printed by each, and they
must agree); the memos are drawn here once and handed to both. Printed per
room: each grader's index build time, then per memo its words, memos/s of
each side by side with the ratio, and the headline each gives; last, memos/s
over the whole mix (every memo once, in turn). Memos longer than the reading
budget are read only to the budget, as in grading. No target: the figures go
in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def rate(grader, memos: list[str], seconds: float) -> float:
    """Memos graded per second, grading ``memos`` in turn for at least ``seconds`` (and once each)."""
    n, t0 = 0, time.perf_counter()
    while True:
        for m in memos:
            grader.grade(m)
            n += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return n / elapsed


def worker(n_documents: int, seed: int, seconds: float, memos_file: str) -> None:
    """In the child: grade the memos of ``memos_file`` with this tree's grader; one JSON object on stdout."""
    from pipeline.grading.reference import ReferenceGrader
    from pipeline.rooms.synthetic.generator import generate_room

    memos = json.loads(Path(memos_file).read_text())
    room = generate_room(f"bench-copy-{n_documents}", seed, n_documents=n_documents)
    t0 = time.perf_counter()
    grader = ReferenceGrader(room)
    out = {
        "words": sum(len(d.text.split()) for d in room.documents),
        "index_s": time.perf_counter() - t0,
        "budget": grader.budget_words,
        "memos": {},
    }
    each = max(0.2, seconds / len(memos))
    for name, memo in memos.items():
        out["memos"][name] = {"rate": rate(grader, [memo], each), "headline": grader.grade(memo).headline}
    out["mix"] = rate(grader, list(memos.values()), seconds)
    print(json.dumps(out))


def run_child(tree: Path, args: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", *args]
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"grader of {tree} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_room(n_documents: int, seconds: float, seed: int, old_tree: Path, tmp: Path) -> None:
    from pipeline.grading.known_answers import known_memos
    from pipeline.rooms.synthetic.generator import generate_room

    room = generate_room(f"bench-copy-{n_documents}", seed, n_documents=n_documents)
    memos_file = tmp / f"memos-{n_documents}.json"
    memos_file.write_text(json.dumps(known_memos(room, seed=seed)))
    child = [str(n_documents), str(seed), str(seconds), str(memos_file)]
    old, new = run_child(old_tree, child), run_child(ROOT, child)
    if old["words"] != new["words"]:
        raise SystemExit(f"the two trees generate different rooms ({old['words']} vs {new['words']} words)")
    print(f"\n== generated room: {n_documents:,} documents, {new['words']:,} words")
    print(
        f"index: old {old['index_s']:.2f} s, new {new['index_s']:.2f} s; reading budget {new['budget']:,} words"
    )
    print(f"{'memo':16s} {'words':>10s} {'old/s':>9s} {'new/s':>9s} {'new/old':>8s}  headline old -> new")
    memos = json.loads(memos_file.read_text())
    for name, memo in memos.items():
        o, n = old["memos"][name], new["memos"][name]
        print(
            f"{name:16s} {len(memo.split()):10,d} {o['rate']:9.3g} {n['rate']:9.3g} {n['rate'] / o['rate']:8.2f}"
            f"  {o['headline']:.3f} -> {n['headline']:.3f}"
        )
    print(f"{'all (mix)':16s} {'':10s} {old['mix']:9.3g} {new['mix']:9.3g} {new['mix'] / old['mix']:8.2f}")


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        n, seed, seconds, memos_file = sys.argv[2:6]
        worker(int(n), int(seed), float(seconds), memos_file)
        return
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--rooms", default="20,5000", help="document counts of the generated rooms, comma-separated"
    )
    ap.add_argument("--seconds", type=float, default=2.0, help="grading time per grader and room (about)")
    ap.add_argument("--seed", type=int, default=0, help="room and adversarial-memo seed")
    ap.add_argument("--old", default="main", help="git revision whose grader is the old one")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        old_tree = Path(tmp) / "old"
        old_tree.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.old, "pipeline"], capture_output=True, check=False
        )
        if archive.returncode != 0:
            raise SystemExit(f"--old {args.old}: {archive.stderr.decode().strip()}")
        subprocess.run(["tar", "-x", "-C", str(old_tree)], input=archive.stdout, check=True)
        for n in (int(x) for x in args.rooms.split(",")):
            bench_room(n, args.seconds, args.seed, old_tree, Path(tmp))


if __name__ == "__main__":
    main()
