"""Stage `grade`: score every ungraded trajectory against its room's rubric.

    python -m pipeline --recipe tiny grade [--regrade] [grade.judges='[reference,llm]']

Per (trajectory, judge): one row per criterion in `grades` and one row of
recall, precision and headline in `memo_scores`, written in one transaction
and stamped with the grader version, so a killed run never leaves a
trajectory half graded. The `reference` judge is the deterministic one
(pipeline.grading.reference: reading budget, quotation, negation, claims);
the `llm` judge asks an OpenAI-compatible model for strict JSON verdicts on
the memo as the reference judge reads it (pipeline.grading.llm_judge) and
records criteria it could not grade as NULL, never as pass or fail.
`--regrade` (grade.regrade) also grades trajectories an older grader
version graded; the old rows stay and the views read each trajectory's
newest version. When both judges ran, the per-kind agreement (rate and
Cohen's kappa) is printed and returned. The logic lives in
pipeline.grading.grade_run; pipeline.steps.grade records the run.
"""

from __future__ import annotations

from contextlib import closing

from pipeline import db, steps
from pipeline.config import PipelineConfig


def run(cfg: PipelineConfig) -> dict:
    with closing(db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)) as con:
        return steps.grade(con, cfg)
