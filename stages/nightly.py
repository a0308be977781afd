"""`make nightly`: one improvement round from the champion, safe to schedule.

    python -m pipeline --recipe pipeline/recipes/default.yaml nightly

The same round as distill (pipeline.round), started from the champion
(pipeline.champion: the base policy until a candidate beats it; distill's
SFT policy when it beat the base): top the champion up to
``nightly.top_up_k`` trajectories per training room, grade, filter every
graded training trajectory so far, build the next dataset, train a
candidate, evaluate candidate vs champion on held-out rooms, and promote the
candidate only if the paired lift's 95% interval (over two or more rooms)
lies above zero. Each round is a row of `nightly_rounds`; its log goes to
<run.dir>/logs/nightly-<time>.log.

Safe to schedule: an exclusive lock on <run.dir>/nightly.lock refuses a
second concurrent round with a clear message (exit 1), at once or after
``nightly.lock_timeout_s``; every step is
idempotent, so a crashed round resumes where it stopped; a round with
nothing new records 'nothing_to_do' and says so.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from pipeline import champion, db
from pipeline.config import ConfigError, PipelineConfig
from pipeline.policies import load_policy
from pipeline.rooms import store
from pipeline.round import logged_to, run_lock, run_rl_round, run_round
from stages import report, rooms


def run(cfg: PipelineConfig) -> dict:
    if cfg.nightly.method not in ("sft", "rl"):
        raise ConfigError(f"nightly.method: {cfg.nightly.method!r} is not one of sft | rl")
    run_dir = Path(cfg.run.dir)
    with run_lock(run_dir, cfg.nightly.lock_timeout_s):
        log_path = run_dir / "logs" / f"nightly-{db.now():%Y%m%d-%H%M%S}.log"
        with logged_to(log_path):
            with closing(db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)) as con:
                no_rooms = not store.room_names(con)
            if no_rooms:
                rooms.run(cfg)
            with closing(db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)) as con:
                start = load_policy(con, champion.current(con, cfg))
                if cfg.nightly.method == "rl":
                    cfg.rl.policy = start.policy_id
                    result = run_rl_round(con, cfg, "nightly", start)
                else:
                    result = run_round(con, cfg, "nightly", start, cfg.nightly.top_up_k)
            if result.decision == "nothing_to_do":
                print(
                    "nothing new to do: no new trajectories, same selection and dataset, candidate already evaluated"
                )
            report.run(cfg)
            print(f"nightly round {result.round_id}: {result.decision} ({result.reason}; log: {log_path})")
    return result.counts() | {"log": str(log_path)}
