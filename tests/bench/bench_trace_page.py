"""Benchmark: the trajectory page of a 5,000-document room, its size and its load time in Chromium.

    python tests/bench/bench_trace_page.py [--documents 5000 --tokens-per-document 600 --batches 20]

One held-out trajectory over a generated room: one subagent call per
document (its whole text as the prompt) in --batches llm_batch rounds, the
memo of tests/report/trace_world.py (half the oracle, a copied paragraph, a
false claim), graded by the reference judge. Printed: the page's build time
(`pipeline show`'s work), the page's size and its sidecars', and the page's
load in headless Chromium (navigation timing: DOMContentLoaded and the load
event, median of --loads runs; the process wall time beside it).
Targets: page <= 5 MB, load <= 2 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # tests.* helpers and this checkout's pipeline, when run as a script

from pipeline import db  # noqa: E402
from pipeline.config import PipelineConfig  # noqa: E402
from pipeline.grading.coverage import coverage_rows  # noqa: E402
from pipeline.grading.grade_run import grade_reference  # noqa: E402
from pipeline.report.trace_pages import write_one  # noqa: E402
from pipeline.rooms.store import save_room  # noqa: E402
from pipeline.rooms.synthetic.generator import generate_room  # noqa: E402
from pipeline.trace_store import TraceWriter  # noqa: E402
from tests.browser import chromium, flags  # noqa: E402
from tests.report.trace_world import POLICY, memo_for, trace_for  # noqa: E402

PROBE = """<script>window.addEventListener("load", function () {
  var n = performance.getEntriesByType("navigation")[0], o = document.createElement("pre");
  o.id = "timing"; o.textContent = n.domContentLoadedEventEnd.toFixed(1) + " " + n.loadEventStart.toFixed(1);
  document.body.appendChild(o);
});</script>"""


def build(run: Path, n_docs: int, tokens: int, batches: int) -> tuple[PipelineConfig, str, dict]:
    cfg = PipelineConfig()
    cfg.run.dir = str(run)
    t = time.perf_counter()
    room = generate_room("bench-room", 5, n_docs, tokens, split="heldout")
    figures = {"generate_s": time.perf_counter() - t}
    with closing(db.connect(cfg.run.db_path)) as con:
        save_room(con, room)
        db.write_rows(
            con, "policies",
            [{"policy_id": POLICY, "base_model": "smollm2-135m-instruct", "adapter": None, "backend": "local",
              "prompt": "worked_example", "harness": "rlm", "sampling": {}, "parent_id": None, "train_id": None,
              "served_model": "smollm2-135m-instruct", "created_at": db.now()}],
        )  # fmt: skip
        trace = trace_for(room, room.name, "eval", 0, memo_for(room, 0), n_batches=batches)
        writer = TraceWriter(con)
        writer.add_trace(trace, room_id=room.name, policy_id=POLICY, sample_index=0, purpose="eval",
                         coverage=coverage_rows(trace, room))  # fmt: skip
        writer.flush()
        t = time.perf_counter()
        grade_reference(con, cfg)
        figures["grade_s"] = time.perf_counter() - t
        figures["calls"] = len(trace.subcalls)
        figures["prompt_mb"] = sum(len(c.prompt) for c in trace.subcalls) / 1e6
    return cfg, trace.trajectory_id, figures


def load_ms(page: Path, profile: Path) -> tuple[float, float, float]:
    """(DOMContentLoaded ms, load event ms, process wall s) of one headless load of a probe copy of ``page``."""
    probe = page.with_name("probe-" + page.name)
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    t = time.perf_counter()
    out = subprocess.run([chromium(), *flags(profile), "--dump-dom", probe.as_uri()], capture_output=True,
                         text=True, timeout=120).stdout  # fmt: skip
    wall = time.perf_counter() - t
    probe.unlink()
    dcl, load = out.split('<pre id="timing">', 1)[1].split("</pre>", 1)[0].split()
    return float(dcl), float(load), wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--documents", type=int, default=5000)
    ap.add_argument("--tokens-per-document", type=int, default=600)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--loads", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cfg, tid, figures = build(Path(tmp) / "run", args.documents, args.tokens_per_document, args.batches)
        print(f"room: {args.documents:,} documents, generated in {figures['generate_s']:.1f} s; trajectory "
              f"{tid}: {figures['calls']:,} subagent calls ({figures['prompt_mb']:.1f} MB of prompts) in "
              f"{args.batches} batches; graded in {figures['grade_s']:.1f} s")  # fmt: skip
        t = time.perf_counter()
        with closing(db.connect(cfg.run.db_path, read_only=True)) as con:
            page = write_one(con, cfg, tid)
        built = time.perf_counter() - t
        sidecars = sorted(page.parent.glob(f"{tid}.calls-*.js"))
        size = page.stat().st_size
        print(f"page: {size / 1e6:.2f} MB, built in {built:.1f} s; sidecars: {len(sidecars)} files, "
              f"{sum(p.stat().st_size for p in sidecars) / 1e6:.1f} MB, largest "
              f"{max(p.stat().st_size for p in sidecars) / 1e6:.2f} MB")  # fmt: skip
        runs = [load_ms(page, Path(tmp) / f"profile-{i}") for i in range(args.loads)]
        dcl = statistics.median(r[0] for r in runs)
        load = statistics.median(r[1] for r in runs)
        wall = statistics.median(r[2] for r in runs)
        print(f"chromium (headless, median of {args.loads}): DOMContentLoaded {dcl:.0f} ms, load event "
              f"{load:.0f} ms; process wall {wall:.1f} s (start to DOM dump)")  # fmt: skip
        ok = size <= 5e6 and load <= 2000
        print(f"targets: page <= 5 MB, load <= 2 s: {'met' if ok else 'MISSED'}")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
