"""Stage `sample`: root trajectories for a policy over a split, into the warehouse.

    python -m pipeline --recipe tiny sample [sample.k=8 sample.split=train]

Tops every (room, policy) up to ``sample.k`` trajectories. Each trajectory is
written whole in ONE transaction when it ends (trajectory row, turns, subagent
calls, coverage; see pipeline.trace_store; with Ray, every result ready at
that moment shares the transaction), so a run killed at any moment —
SIGKILL included — loses only the trajectories in flight, and the next run
finishes exactly the missing sample indices (a trajectory's id is derived
from its key (room, policy, purpose, index) and is the primary key, so
duplicates are impossible). Only this driver process writes DuckDB: REPL
workers read an exported copy of the room, and with ``sample.executor=ray``
Ray tasks return traces that the driver ingests.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb
from tqdm import tqdm

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.grading.coverage import coverage_rows
from pipeline.harness import kernel_layer
from pipeline.harness.trace import Trace
from pipeline.llm.base import make_backend
from pipeline.policies import Policy, base_policy, load_policy, register_policy, root_backend_config
from pipeline.rooms import store
from pipeline.rooms.model import Room
from pipeline.rooms.probes import ProbeIndex
from pipeline.trace_store import TraceRows, TraceWriter, trace_rows, trajectory_id


@dataclass
class Job:
    room: str
    sample_index: int
    trajectory_id: str
    seed: int


def resolve_policy(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig) -> Policy:
    if cfg.sample.policy:
        return load_policy(con, cfg.sample.policy)
    policy = base_policy(cfg)
    register_policy(con, policy)
    return policy


def missing_jobs(
    con: duckdb.DuckDBPyConnection, policy_id: str, rooms: list[str], k: int, purpose: str, seed: int
) -> list[Job]:
    have = {
        (r, i)
        for r, i in con.execute(
            "select room_id, sample_index from trajectories where policy_id = ? and purpose = ?",
            [policy_id, purpose],
        ).fetchall()
    }
    jobs = []
    for room in rooms:
        for i in range(k):
            if (room, i) not in have:
                tid = trajectory_id(policy_id, room, purpose, i)
                s = int(hashlib.sha256(f"{seed}|{tid}".encode()).hexdigest()[:8], 16)
                jobs.append(Job(room, i, tid, s))
    return jobs


# --------------------------------------------------------------------------- running


async def _episode(
    cfg: PipelineConfig, room: Room, room_dir: Path, root, sub, policy: Policy, job: Job
) -> Trace:
    import dataclasses

    from pipeline.harness.root import run_episode
    from pipeline.harness.toolloop import run_toolloop_episode

    harness = dataclasses.replace(cfg.harness, kind=policy.harness, prompt=policy.prompt)
    sampling = dataclasses.replace(cfg.sampling, **policy.sampling)
    fn = run_episode if policy.harness == "rlm" else run_toolloop_episode
    return await fn(
        room,
        room_dir,
        root,
        sub,
        harness,
        sampling,
        trajectory_id=job.trajectory_id,
        policy_id=policy.policy_id,
        seed=job.seed,
    )


def _error_trace(job: Job, room: str, policy_id: str, harness: str, exc: BaseException, t0: float) -> Trace:
    return Trace(
        trajectory_id=job.trajectory_id,
        room=room,
        policy_id=policy_id,
        harness=harness,
        status="error",
        end_reason=f"{type(exc).__name__}: {exc}"[:2000],
        started_at=datetime.now(UTC).replace(tzinfo=None).isoformat(),
        wall_s=time.monotonic() - t0,
    )


def export_dir(cfg: PipelineConfig, room: Room) -> Path:
    from pipeline.harness.room_export import export_room

    return export_room(room, Path(cfg.run.dir) / "room_exports" / room.name)


def sample_policy(
    con: duckdb.DuckDBPyConnection,
    cfg: PipelineConfig,
    policy: Policy,
    rooms: list[str],
    k: int,
    purpose: str,
    desc: str = "sample",
) -> dict[str, int]:
    """Top every (room, policy, purpose) up to k trajectories; returns counts."""
    if (
        policy.harness == "rlm"
    ):  # refuse before any work when the sandbox would run below the recipe's minimum
        kernel_layer.resolve_level(cfg.harness.sandbox_level, cfg.harness.min_sandbox_level)
    jobs = missing_jobs(con, policy.policy_id, rooms, k, purpose, cfg.run.seed)
    counts = {"planned": len(rooms) * k, "existing": len(rooms) * k - len(jobs), "sampled": 0, "failed": 0}
    if not jobs:
        return counts
    loaded = {name: store.load_room(con, name) for name in sorted({j.room for j in jobs})}
    indexes = {name: ProbeIndex(room.probes) for name, room in loaded.items()}
    dirs = {name: export_dir(cfg, room) for name, room in loaded.items()}
    bar = tqdm(total=len(jobs), desc=desc, unit="traj")

    writer = TraceWriter(con)

    def ingest(finished: list[tuple[TraceRows, list[dict]]]) -> None:
        """Commit trajectories that have finished, whole, in one transaction: a kill loses only those in flight."""
        for rows, coverage in finished:
            writer.add(rows, coverage)
            counts["failed"] += rows.status == "error"
        counts["sampled"] += writer.flush()
        bar.update(len(finished))
        bar.set_postfix(done=counts["sampled"], failed=counts["failed"])

    try:
        if cfg.sample.executor == "ray":
            from pipeline.executors import run_ray

            run_ray(cfg, policy, jobs, loaded, dirs, purpose, ingest)
        elif cfg.sample.executor == "local":
            asyncio.run(_run_local(cfg, policy, jobs, loaded, indexes, dirs, purpose, ingest))
        else:
            raise ValueError(f"sample.executor: unknown executor {cfg.sample.executor!r} (local | ray)")
    finally:
        bar.close()
    return counts


def finished_rows(
    trace: Trace, room: Room, index: ProbeIndex, job: Job, policy_id: str, purpose: str
) -> tuple[TraceRows, list[dict]]:
    """A finished trajectory's warehouse rows and coverage, computed where it finished."""
    rows = trace_rows(
        trace, room_id=room.room_id, policy_id=policy_id, sample_index=job.sample_index, purpose=purpose
    )
    return rows, coverage_rows(trace, room, index)


async def _run_local(cfg, policy, jobs, loaded, indexes, dirs, purpose, ingest) -> None:
    root = make_backend(root_backend_config(policy, cfg))
    sub = make_backend(cfg.models.subagent)
    gate = asyncio.Semaphore(cfg.sample.concurrency)

    async def one(job: Job) -> None:
        async with gate:
            t0 = time.monotonic()
            try:
                trace = await _episode(cfg, loaded[job.room], dirs[job.room], root, sub, policy, job)
            except Exception as exc:  # the harness should not raise; if it does, record it
                trace = _error_trace(job, job.room, policy.policy_id, policy.harness, exc, t0)
            room = loaded[job.room]
            # synchronous: one writer, one transaction per trajectory
            ingest([finished_rows(trace, room, indexes[job.room], job, policy.policy_id, purpose)])

    try:
        await asyncio.gather(*(one(j) for j in jobs))
    finally:
        for b in (root, sub):
            close = getattr(b, "aclose", None)
            if close:
                await close()


def run(cfg: PipelineConfig) -> dict:
    con = db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)
    with db.stage_run(con, "sample", cfg.hash("sample", "harness", "sampling", "models")) as counts:
        policy = resolve_policy(con, cfg)
        rooms = store.room_names(con, split=cfg.sample.split)
        if not rooms:
            raise RuntimeError(
                f"no rooms in split {cfg.sample.split!r}: run `python -m pipeline rooms generate` first"
            )
        purpose = "train" if cfg.sample.split == "train" else "eval"
        counts.update(policy_id=policy.policy_id, rooms=len(rooms))
        counts.update(sample_policy(con, cfg, policy, rooms, cfg.sample.k, purpose))
    con.close()
    return counts
