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
pipeline.grading.grade_run.
"""

from __future__ import annotations

import sys

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.grading.agreement import agreement_report
from pipeline.grading.grade_run import (
    check_judges,
    grade_llm,
    grade_reference,
    graded_by_older_version,
)
from pipeline.grading.reference import GRADER_VERSION


def run(cfg: PipelineConfig) -> dict:
    con = db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)
    check_judges(cfg.grade.judges)
    with db.stage_run(con, "grade", cfg.hash("grade", "models")) as counts:
        if "reference" in cfg.grade.judges:
            counts["graded_reference"] = grade_reference(con, cfg)
            stale = graded_by_older_version(con)
            if stale:
                counts["graded_by_older_version"] = stale
                print(
                    f"{stale} trajectories keep scores from an older grader version "
                    f"(current: {GRADER_VERSION}); `grade --regrade` grades them again",
                    file=sys.stderr,
                )
        if "llm" in cfg.grade.judges:
            counts["graded_llm"] = grade_llm(con, cfg)
        if {"reference", "llm"} <= set(cfg.grade.judges):
            report = agreement_report(con)
            counts["agreement"] = report
            for row in report:
                print(row)
    con.close()
    return counts
