"""Dataset stage: accepted trajectories -> a chat-format Hugging Face dataset with root-only loss masks.

Run: ``python -m pipeline --recipe <recipe> dataset`` (or ``stages.dataset.run(cfg)``).

Builds the dataset of the selection ``dataset.selection_id`` (default: the
newest selection) under ``<run.dir>/datasets/<dataset_id>/`` and registers
it; the same selection and dataset config again does nothing. What an
example holds, how it is masked and split: pipeline.training.dataset.
"""

from __future__ import annotations

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.training import dataset


def run(cfg: PipelineConfig) -> dict:
    con = db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)
    try:
        chash = dataset.config_hash(cfg)
        with db.stage_run(con, "dataset", chash) as counts:
            counts.update(dataset.build(con, cfg, chash))
        return counts
    finally:
        con.close()
