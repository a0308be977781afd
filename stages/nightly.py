"""`make nightly`: one improvement round, safe to schedule.

    python -m pipeline --recipe pipeline/recipes/default.yaml nightly

A round: take the champion (pipeline.champion: the base policy until a
candidate beats it; distill's SFT policy when it beat the base), top up
its trajectories on the training rooms to ``nightly.top_up_k`` per room,
grade, filter over every graded training trajectory so far, build the next
dataset version, train a candidate from the champion's base model, evaluate
candidate vs champion on held-out rooms, and promote the candidate only if
the paired lift's 95% interval lies above zero. Each round is a row of
`nightly_rounds`; its log goes to <run.dir>/logs/nightly-<time>.log.

Safe to schedule: an exclusive lock on <run.dir>/nightly.lock refuses a
second concurrent round with a clear message (exit 1); every step is
idempotent, so a crashed round resumes where it stopped; a round with
nothing new (no new trajectories, same selection, same dataset, candidate
already evaluated) records 'nothing_to_do' and says so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

from pipeline import champion, db, evaluation, sampling
from pipeline.config import PipelineConfig
from pipeline.errors import UserError
from pipeline.metrics import headline
from pipeline.policies import base_policy, load_policy
from pipeline.rooms import store


class LockedError(UserError):
    """Another round holds the run folder's lock."""


@contextlib.contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "nightly.lock"
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            raise LockedError(
                f"another nightly round is running ({path} held by {holder}); not starting"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {__import__('os').getpid()}\n")
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


def run(cfg: PipelineConfig) -> dict:
    run_dir = Path(cfg.run.dir)
    with run_lock(run_dir):
        logs = run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log_path = logs / f"nightly-{db.now():%Y%m%d-%H%M%S}.log"
        with open(log_path, "w") as log, contextlib.redirect_stdout(_Tee(sys.stdout, log)):
            result = _round(cfg)
            result["log"] = str(log_path)
            print(f"nightly round {result['round_id']}: {result['decision']} (log: {log_path})")
            return result


def _round(cfg: PipelineConfig) -> dict:
    from stages import dataset, filter, grade, report, train

    con = db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)
    if not store.room_names(con):
        con.close()
        from stages import rooms

        rooms.run(cfg)
        con = db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)
    champ_id = champion.current(con, cfg)
    champ = load_policy(con, champ_id)
    round_id = f"round-{db.now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:4]}"
    con.execute(
        "insert into nightly_rounds (round_id, champion_before, decision, started_at) values (?, ?, 'running', ?)",
        [round_id, champ_id, db.now()],
    )
    try:
        train_rooms = store.room_names(con, split="train")
        top = sampling.sample_policy(
            con, cfg, champ, train_rooms, cfg.nightly.top_up_k, "train", desc="top-up"
        )
        con.close()
        grade.run(cfg)
        # Filter over everything accepted so far, descended from the base policy.
        lineage = cfg.filter.policy_lineage or base_policy(cfg).policy_id
        fcfg = dataclasses.replace(cfg, filter=dataclasses.replace(cfg.filter, policy_lineage=lineage))
        sel = filter.run(fcfg)
        ds = dataset.run(fcfg)
        tr = train.run(fcfg)
        con = db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)
        cand_id = tr.get("policy_id")
        if not cand_id:
            raise RuntimeError(f"train produced no policy: {tr}")
        already = con.execute(
            "select count(*) from evaluations where policy_id = ? and base_policy_id = ? and metric = 'lift'",
            [cand_id, champ_id],
        ).fetchone()[0]
        nothing_new = top["sampled"] == 0 and sel.get("reused") and ds.get("reused") and already > 0
        heldout = store.room_names(con, split="heldout")
        eval_id, rows = evaluation.evaluate_policies(con, cfg, champ, [load_policy(con, cand_id)], heldout)
        lift = next((r for r in rows if r["policy_id"] == cand_id and r["metric"] == "lift"), None)
        promoted = champion.beats(lift) and cand_id != champ_id
        decision = "nothing_to_do" if nothing_new else ("promoted" if promoted else "kept_champion")
        if promoted and not nothing_new:
            champion.promote(con, cand_id)
        con.execute(
            "update nightly_rounds set candidate_policy_id=?, promoted=?, lift=?, lift_ci_low=?, lift_ci_high=?, "
            "decision=?, ended_at=? where round_id=?",
            [
                cand_id,
                promoted and not nothing_new,
                lift and lift["value"],
                lift and lift["ci_low"],
                lift and lift["ci_high"],
                decision,
                db.now(),
                round_id,
            ],
        )
        print(headline(rows))
        if nothing_new:
            print(
                "nothing new to do: no new trajectories, same selection and dataset, candidate already evaluated"
            )
        con.close()
        report.run(cfg)
        return {
            "round_id": round_id,
            "decision": decision,
            "champion_before": champ_id,
            "candidate": cand_id,
            "eval_id": eval_id,
            "new_trajectories": top["sampled"],
        }
    except BaseException as exc:
        with contextlib.suppress(Exception):
            c2 = db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)
            c2.execute(
                "update nightly_rounds set decision='failed', ended_at=? where round_id=?",
                [db.now(), round_id],
            )
            c2.close()
        raise exc
