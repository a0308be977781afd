"""Stage `evaluate`: base vs candidate policies on held-out rooms.

    python -m pipeline --recipe tiny evaluate [evaluate.k=4 evaluate.candidates='[sft-...]']

Samples ``evaluate.k`` trajectories per held-out room for the base policy and
each candidate (``evaluate.candidates`` / ``--policy``; from the command
line, by default the policy of the newest train run, printed) with the same prompt,
sampling parameters, subagents and judge, grades them with the reference
judge, and stores per policy: the mean headline score (F1 of recall and
precision, pipeline.grading.reference) with a 95% bootstrap interval over
rooms, the paired difference to the base with its interval, recall,
precision, pass rate by criterion kind, coverage, finished rate and the behaviour
metrics of the reference report — rows of `evaluations`. Held-out rooms are
only ever sampled with purpose 'eval', so they never reach training.
"""

from __future__ import annotations

from contextlib import closing

from pipeline import db, evaluation, steps
from pipeline.config import PipelineConfig


def run(cfg: PipelineConfig) -> dict:
    with closing(db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)) as con:
        rooms = evaluation.heldout_rooms(con)
        base, candidates = evaluation.policies_to_compare(con, cfg)
        made = steps.evaluate(con, cfg, base, candidates, rooms)
        return {
            "eval_id": made.eval_id,
            "rooms": len(rooms),
            "policies": len(made.policy_ids),
            "headline": made.headline,
        }
