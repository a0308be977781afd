"""Stage `filter`: rejection-sample graded training trajectories.

    python -m pipeline --recipe tiny filter [filter.min_score=0.4 filter.min_coverage=0.8]

The rules are SQL (sql/filters/select.sql) parameterised from the recipe's
`filter` section: finished by submit(), minimum rubric pass rate (absolute,
optionally relative to the room's mean), minimum coverage, trap failures,
root conversation length, policy lineage, duplicates (same code turns on
the same room) and top-k per room. Every training trajectory gets a row in
`selections` with the first rule that rejected it, or 'accepted'. Prints the funnel
(sampled → finished → score → coverage → accepted), overall and per room.
Zero accepted trajectories is an error (exit 1), never an empty dataset.
The selection is the filter run's output (table `lineage`): the next
`dataset` command uses it unless told otherwise, even when an earlier run
already made the same selection. The logic lives in pipeline.training.selection.
"""

from __future__ import annotations

from contextlib import closing

from pipeline import db, steps
from pipeline.config import PipelineConfig


def run(cfg: PipelineConfig) -> dict:
    with closing(db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)) as con:
        return steps.select(con, cfg).counts()
