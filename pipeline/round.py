"""One improvement round, the same for distill (round 0, from the base) and nightly (from the champion).

(ladder →) sample → grade → filter → dataset → train → evaluate → champion decision, on
one warehouse connection, each step handing the next the id it made
(pipeline.steps). The round starts from a policy: it tops that policy up to
``k`` trajectories per training room, filters every graded training
trajectory descended from the recipe's base policy, trains a candidate,
evaluates it against the starting policy on the held-out rooms, and lets
pipeline.champion decide and record the round. A failed step marks the
round failed and re-raises.

Also here: the run folder's round lock (a second concurrent nightly is
refused) and the tee that copies a round's output to its log file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb

from pipeline import champion, evaluation, steps
from pipeline.config import PipelineConfig
from pipeline.errors import UserError
from pipeline.policies import Policy, base_policy, load_policy
from pipeline.rooms import store


@dataclass
class Round:
    round_id: str
    decision: str
    start_policy_id: str
    candidate: str
    selection_id: str
    dataset_id: str
    train_id: str
    eval_id: str
    headline: str
    new_trajectories: int
    reason: str = ""  # why the rule promoted or not, with the design's minimum detectable effect

    def counts(self) -> dict:
        return dataclasses.asdict(self)


def run_round(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, kind: str, start: Policy, k: int) -> Round:
    """One round of ``kind`` (distill | nightly) from ``start``, topping it up to ``k`` per training room."""
    round_id = champion.open_round(con, kind, start.policy_id)
    try:
        steps.ladder(
            con, cfg, store.room_names(con)
        )  # what each room offers a root, to place trajectories on
        sampled = steps.sample(
            con, cfg, start, store.room_names(con, split="train"), k, "train", desc=f"{kind} sample"
        )
        steps.grade(con, cfg)
        # Everything graded so far that descends from the base policy (one chat template, one lineage).
        lineage_root = cfg.filter.policy_lineage or base_policy(cfg).policy_id
        fcfg = dataclasses.replace(cfg, filter=dataclasses.replace(cfg.filter, policy_lineage=lineage_root))
        sel = steps.select(con, fcfg)
        ds = steps.build_dataset(con, cfg, sel.selection_id)
        tr = steps.train(con, cfg, steps.plan_training(con, cfg, ds.dataset_id))
        seen = champion.evaluated_against(con, tr.policy_id, start.policy_id)
        heldout = evaluation.heldout_rooms(con)
        nothing_new = sampled.counts["sampled"] == 0 and sel.reused and ds.reused and seen
        # a rerun of a finished round keeps its evaluation: every new one samples afresh
        ev = steps.evaluate(con, cfg, start, [load_policy(con, tr.policy_id)], heldout, reuse=nothing_new)
        decision = champion.close_round(
            con,
            cfg,
            round_id,
            start.policy_id,
            tr.policy_id,
            ev.lift(tr.policy_id),
            nothing_new,
            ev.withheld(tr.policy_id),
        )
        why = champion.reason(
            ev.lift(tr.policy_id), ev.metric(tr.policy_id, "lift_mde"), cfg.evaluate.min_effect
        )
    except BaseException:
        with contextlib.suppress(Exception):
            champion.fail_round(con, round_id)
        raise
    return Round(
        round_id=round_id,
        decision=decision,
        start_policy_id=start.policy_id,
        candidate=tr.policy_id,
        selection_id=sel.selection_id,
        dataset_id=ds.dataset_id,
        train_id=tr.train_id,
        eval_id=ev.eval_id,
        headline=ev.headline,
        new_trajectories=sampled.counts["sampled"],
        reason=why,
    )


def run_rl_round(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, kind: str, start: Policy) -> Round:
    """One round of ``kind`` improved by GRPO instead of SFT: rl → evaluate → champion decision.

    The RL policy is evaluated against ``start`` on the held-out rooms by the same paired comparison
    as an SFT candidate, and the same champion rule decides.
    """
    round_id = champion.open_round(con, kind, start.policy_id)
    try:
        steps.ladder(con, cfg, store.room_names(con))
        trained = steps.rl(con, cfg, start.policy_id)
        seen = champion.evaluated_against(con, trained.policy_id, start.policy_id)
        heldout = evaluation.heldout_rooms(con)
        ev = steps.evaluate(
            con, cfg, start, [load_policy(con, trained.policy_id)], heldout, reuse=trained.skipped and seen
        )
        decision = champion.close_round(
            con,
            cfg,
            round_id,
            start.policy_id,
            trained.policy_id,
            ev.lift(trained.policy_id),
            trained.skipped and seen,
            ev.withheld(trained.policy_id),
        )
        why = champion.reason(
            ev.lift(trained.policy_id), ev.metric(trained.policy_id, "lift_mde"), cfg.evaluate.min_effect
        )
    except BaseException:
        with contextlib.suppress(Exception):
            champion.fail_round(con, round_id)
        raise
    return Round(
        round_id=round_id,
        decision=decision,
        start_policy_id=start.policy_id,
        candidate=trained.policy_id,
        selection_id="",
        dataset_id="",
        train_id=trained.rl_id,
        eval_id=ev.eval_id,
        headline=ev.headline,
        new_trajectories=int(trained.counts.get("rollouts", 0)),
        reason=why,
    )


class LockedError(UserError):
    """Another round holds the run folder's lock."""


@contextlib.contextmanager
def run_lock(run_dir: Path, timeout_s: float = 0.0) -> Iterator[None]:
    """An exclusive lock on <run.dir>/nightly.lock; refused (naming its holder) after ``timeout_s``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "nightly.lock"
    deadline = time.monotonic() + timeout_s
    with open(path, "a+") as fh:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(min(1.0, max(deadline - time.monotonic(), 0.01)))
                    continue
                fh.seek(0)
                holder = fh.read().strip() or "unknown"
                raise LockedError(
                    f"another nightly round is running ({path} held by {holder}); not starting"
                ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}\n")
        fh.flush()
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class _Tee:
    def __init__(self, *streams):
        self.streams = streams

    def write(self, s: str) -> int:
        for st in self.streams:
            st.write(s)
            st.flush()
        return len(s)

    def flush(self) -> None:
        for st in self.streams:
            st.flush()


@contextlib.contextmanager
def logged_to(path: Path) -> Iterator[None]:
    """Standard output goes to the terminal and to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as log, contextlib.redirect_stdout(_Tee(sys.stdout, log)):
        yield
