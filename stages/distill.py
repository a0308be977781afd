"""`make distill`: every stage once, in order, on one warehouse.

    python -m pipeline --recipe pipeline/recipes/default.yaml distill

rooms → sample (training rooms) → grade → filter → dataset → train →
evaluate (held-out rooms, base vs the new SFT policy) → report. Each stage
is idempotent, so rerunning after a crash finishes what is missing. Ends by
printing the held-out headline scores of base and SFT with their intervals, the
lift, the wall time and where the report is.
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path

from pipeline.config import PipelineConfig

ORDER = ["rooms", "sample", "grade", "filter", "dataset", "train", "evaluate", "report"]


def run(cfg: PipelineConfig) -> dict:
    t0 = time.monotonic()
    results = {}
    for name in ORDER:
        print(f"\n=== stage {name} ===", flush=True)
        t = time.monotonic()
        results[name] = importlib.import_module(f"stages.{name}").run(cfg)
        print(f"=== {name} done in {time.monotonic() - t:.1f} s", flush=True)
    wall = time.monotonic() - t0
    report = Path(cfg.run.dir) / "report" / "report.html"
    print("\n" + "=" * 72)
    print(results["evaluate"].get("headline", ""))
    print(f"wall time {wall / 60:.1f} min; report: {report}")
    return {
        "wall_s": round(wall, 1),
        "report": str(report),
        "headline": results["evaluate"].get("headline", ""),
    }
