"""Dataset stage: accepted trajectories -> a chat-format Hugging Face dataset with root-only loss masks.

Run: ``python -m pipeline --recipe <recipe> dataset`` (or ``stages.dataset.run(cfg)``).

Builds the dataset of the selection ``dataset.selection_id`` (``--selection``;
from the command line, by default the newest filter run's selection, printed) under ``<run.dir>/datasets/<dataset_id>/`` and registers
it; the same selection and dataset config again does nothing. What an
example holds, how it is masked and split: pipeline.training.dataset.
"""

from __future__ import annotations

from contextlib import closing

from pipeline import db, steps
from pipeline.config import PipelineConfig


def run(cfg: PipelineConfig) -> dict:
    with closing(db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)) as con:
        return steps.build_dataset(con, cfg, cfg.dataset.selection_id).counts
