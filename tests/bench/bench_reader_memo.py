"""Benchmark: what the stand-in reader alone scores, this tree's reader beside an older one's.

    python tests/bench/bench_reader_memo.py [--old main] [--corpus ../shared/data] [--seeds 101,102,103]

The worked-example program (pipeline/harness/prompts/worked_example_heron.episode.yaml)
asks the extractive reader about every document and joins the notes of its
open findings into the memo. This runs that program without a root model on
generated rooms of 20 and 60 documents (and CUAD rooms of 10 contracts when
the corpus is there), with the reader of this tree and of git revision
``--old`` (in a child process from ``git archive``, since both are the
package ``pipeline``), and grades both memos with this tree's reference
judge. It separates what the reader contributes to a distill's figures from
what the root does. Printed: per room and reader, headline, recall,
precision and claims; then the means per room source. No target.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def rooms(seeds: list[int], corpus: Path | None) -> list:
    from pipeline.rooms.synthetic.generator import generate_room

    out = [
        generate_room(f"reader-{n}-{s}", s, n_documents=n, tokens_per_document=250)
        for n in (20, 60)
        for s in seeds
    ]
    if corpus is not None and (corpus / "cuad").is_dir():
        from pipeline.rooms.cuad import build_cuad_rooms

        out += build_cuad_rooms(corpus, n_rooms=2, contracts_per_room=10, seed=3)
    return out


def reader_memo(room, words_per_prompt: int = 1200) -> str:
    """The worked-example program's memo: every document to the reader (in pieces), open findings' notes."""
    from pipeline.llm.extractive import extract

    answers: list[str] = []
    for d in room.documents:
        words = d.text.split(" ")
        for i in range(0, len(words), words_per_prompt):
            piece = " ".join(words[i : i + words_per_prompt])
            answers += extract(f"List the diligence risks.\n=== {d.path} ===\n{piece}")
    text = "\n".join(answers)
    found = [json.loads(a) for a in answers if a.startswith("{")]
    # one line per open finding from the facts both readers report (the old one also wrote a note)
    return "# Diligence memo\n\n" + "\n\n".join(
        f"{f['issue']} ({', '.join(f['parties'] + f['amounts'])}), {f['path']}."
        for f in found
        if "Resolved: " + f["key"] not in text
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", default="main", help="git revision whose reader is the old one")
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared" / "data"), help="folder holding cuad/")
    ap.add_argument("--seeds", default="101,102,103", help="generated-room seeds, comma-separated")
    ap.add_argument("--memos-out", default=None, help=argparse.SUPPRESS)  # the child's answer file
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    corpus = Path(args.corpus) if args.corpus else None
    if args.memos_out:  # in the child: this tree's reader only
        Path(args.memos_out).write_text(json.dumps({r.name: reader_memo(r) for r in rooms(seeds, corpus)}))
        return
    sys.path.insert(0, str(ROOT))
    from pipeline.grading.reference import ReferenceGrader

    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "old"
        tree.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.old, "pipeline"], capture_output=True
        )
        if archive.returncode != 0:
            raise SystemExit(f"--old {args.old}: {archive.stderr.decode().strip()}")
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
        out = Path(tmp) / "old.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:], "--memos-out", str(out)]
        subprocess.run(cmd, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, check=True)
        old = json.loads(out.read_text())
    means: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    print(
        f"{'room':16s} {'reader':6s} {'headline':>8s} {'recall':>7s} {'precision':>9s} {'claims':>6s} {'cut':>5s}"
    )
    for room in rooms(seeds, corpus):
        grader = ReferenceGrader(room)
        for who, memo in (("old", old[room.name]), ("new", reader_memo(room))):
            g = grader.grade(memo)
            means.setdefault((room.source, who), []).append((g.headline, g.recall, g.precision))
            print(
                f"{room.name:16s} {who:6s} {g.headline:8.3f} {g.recall:7.3f} {g.precision:9.3f}"
                f" {g.n_claims:6d} {str(g.cut):>5s}"
            )
    for (source, who), rows in means.items():
        h, r, p = (sum(x[i] for x in rows) / len(rows) for i in range(3))
        print(
            f"mean {source:9s} {who:4s}: headline {h:.3f} recall {r:.3f} precision {p:.3f} ({len(rows)} rooms)"
        )


if __name__ == "__main__":
    main()
