"""Stage `sample`: root trajectories for a policy over a split, into the warehouse.

    python -m pipeline --recipe tiny sample [sample.k=8 sample.split=train sample.executor=ray]

Tops every (room, policy) up to ``sample.k`` trajectories of ``sample.policy``
(default: the recipe's base policy). Each trajectory is written whole when it
ends, so a killed run loses only those in flight and the next run samples
exactly the missing ones (see pipeline.sampling).
"""

from __future__ import annotations

from contextlib import closing

from pipeline import db, sampling, steps
from pipeline.config import PipelineConfig


def run(cfg: PipelineConfig) -> dict:
    with closing(db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)) as con:
        policy = sampling.resolve_policy(con, cfg)
        rooms = sampling.rooms_to_sample(con, cfg.sample.split)
        purpose = "train" if cfg.sample.split == "train" else "eval"
        made = steps.sample(con, cfg, policy, rooms, cfg.sample.k, purpose)
        return {"policy_id": made.policy_id, "rooms": len(rooms), **made.counts}
