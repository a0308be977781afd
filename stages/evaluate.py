"""Stage `evaluate`: base vs candidate policies on held-out rooms.

    python -m pipeline --recipe tiny evaluate [evaluate.k=4 evaluate.candidates='[sft-...]']

Samples ``evaluate.k`` trajectories per held-out room for the base policy and
each candidate (default: the newest trained policy) with the same prompt,
sampling parameters, subagents and judge, grades them with the reference
judge, and stores per policy: the mean headline score (F1 of recall and
precision, pipeline.grading.reference) with a 95% bootstrap interval over
rooms, the paired difference to the base with its interval, recall,
precision, pass rate by criterion kind, coverage, finished rate and the behaviour
metrics of the reference report — rows of `evaluations`. Held-out rooms are
only ever sampled with purpose 'eval', so they never reach training.
"""

from __future__ import annotations

from pipeline import db, evaluation
from pipeline.config import PipelineConfig
from pipeline.metrics import headline


def run(cfg: PipelineConfig) -> dict:
    con = db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)
    with db.stage_run(con, "evaluate", cfg.hash("evaluate", "harness", "sampling", "models")) as counts:
        rooms = evaluation.heldout_rooms(con)
        base, candidates = evaluation.policies_to_compare(con, cfg)
        eval_id, rows = evaluation.evaluate_policies(con, cfg, base, candidates, rooms)
        text = headline(rows)
        print(text)
        counts.update(eval_id=eval_id, rooms=len(rooms), policies=1 + len(candidates), headline=text)
    con.close()
    return counts
