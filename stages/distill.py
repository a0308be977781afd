"""`make distill`: round 0 from the base policy, then the report.

    python -m pipeline --recipe pipeline/recipes/default.yaml distill

rooms, then one round (pipeline.round: sample the training rooms → grade →
filter → dataset → train → evaluate on held-out rooms, base vs the new SFT
policy → champion decision), then report. Every step is idempotent, so
rerunning after a crash finishes what is missing. The champion rule is the
nightly one (pipeline.champion): the SFT policy becomes the champion when
its lift's 95% interval over the base, over at least two held-out rooms,
lies above zero, so the first `make nightly` samples the distilled policy.
Ends by printing the held-out scores with their intervals, the lift, the
champion, the wall time and where the report is.
"""

from __future__ import annotations

import time
from contextlib import closing
from pathlib import Path

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.policies import base_policy
from pipeline.round import run_round
from stages import report, rooms

CHAMPION_LINES = {
    "promoted": "champion: {c} (its lift's interval lies above zero; nightly samples it)",
    "kept_champion": "champion: {c} (the base; the rule's reason is on the line above)",
    "left_champion": "champion: {c} (set by a nightly round; distill leaves it)",
    "lift_withheld": "champion: {c} (kept: the lift was withheld, see the evaluation line above)",
    "nothing_to_do": "champion: {c} (nothing new since the last distill)",
}


def run(cfg: PipelineConfig) -> dict:
    t0 = time.monotonic()
    rooms.run(cfg)
    with closing(db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)) as con:
        result = run_round(con, cfg, "distill", base_policy(cfg), cfg.sample.k)
        champ = con.execute("select policy_id from champion").fetchone()[0]
    report.run(cfg)
    wall = time.monotonic() - t0
    path = Path(cfg.run.dir) / "report" / "report.html"
    print("\n" + "=" * 72)
    print(result.headline)
    print(f"rule: {result.reason}")
    print(CHAMPION_LINES[result.decision].format(c=champ))
    print(f"wall time {wall / 60:.1f} min; report: {path}")
    return result.counts() | {"champion": champ, "wall_s": round(wall, 1), "report": str(path)}
