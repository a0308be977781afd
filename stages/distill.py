"""`make distill`: every stage once, in order, on one warehouse.

    python -m pipeline --recipe pipeline/recipes/default.yaml distill

rooms → sample (training rooms) → grade → filter → dataset → train →
evaluate (held-out rooms, base vs the new SFT policy) → champion → report.
Each stage is idempotent, so rerunning after a crash finishes what is
missing. The champion step is round 0 of nightly (pipeline.champion): the SFT
policy becomes the champion when its lift's 95% interval over the base lies
above zero, so the first `make nightly` samples the distilled policy. Ends by
printing the held-out headline scores of base and SFT with their intervals, the
lift, the champion, the wall time and where the report is.
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path

from pipeline import champion, db
from pipeline.config import PipelineConfig

ORDER = ["rooms", "sample", "grade", "filter", "dataset", "train", "evaluate", "report"]


def _stage(name: str, cfg: PipelineConfig) -> dict:
    print(f"\n=== stage {name} ===", flush=True)
    t = time.monotonic()
    result = importlib.import_module(f"stages.{name}").run(cfg)
    print(f"=== {name} done in {time.monotonic() - t:.1f} s", flush=True)
    return result


def adopt(cfg: PipelineConfig, eval_id: str) -> dict:
    con = db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)
    try:
        return champion.adopt_distilled(con, cfg, eval_id)
    finally:
        con.close()


def run(cfg: PipelineConfig) -> dict:
    t0 = time.monotonic()
    results = {}
    for name in ORDER[:-1]:
        results[name] = _stage(name, cfg)
    # round 0 before the report, so the report's rounds table shows it
    results["champion"] = adopt(cfg, results["evaluate"]["eval_id"])
    results["report"] = _stage("report", cfg)
    wall = time.monotonic() - t0
    report = Path(cfg.run.dir) / "report" / "report.html"
    print("\n" + "=" * 72)
    print(results["evaluate"].get("headline", ""))
    print(_champion_line(results["champion"]))
    print(f"wall time {wall / 60:.1f} min; report: {report}")
    return {
        "wall_s": round(wall, 1),
        "report": str(report),
        "headline": results["evaluate"].get("headline", ""),
        "champion": results["champion"],
    }


def _champion_line(c: dict) -> str:
    return {
        "promoted": f"champion: {c.get('champion')} (its lift's interval lies above zero; nightly samples it)",
        "kept_champion": f"champion: {c.get('champion')} (the base; the lift's interval does not lie above zero)",
        "left_champion": f"champion: {c.get('champion')} (set by a nightly round; distill leaves it)",
    }.get(c["decision"], "champion: unchanged (no candidate was evaluated)")
