"""Sampling: root trajectories for a policy over rooms, written to the warehouse whole.

``sample_policy`` tops every (room, policy, purpose) up to k trajectories.
Each trajectory is written whole in ONE transaction when it ends (trajectory
row, turns, subagent calls, coverage; see pipeline.trace_store; with Ray,
every result ready at that moment shares the transaction), so a run killed
at any moment — SIGKILL included — loses only the trajectories in flight,
and the next run finishes exactly the missing sample indices (a
trajectory's id is derived from its key (room, policy, purpose, index) and
is the primary key, so duplicates are impossible). Only the driver process
writes DuckDB: REPL workers read an exported copy of the room, and Ray tasks
(``sample.executor=ray``) return packed rows that the driver ingests.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb
from tqdm import tqdm

from pipeline.config import PipelineConfig
from pipeline.errors import UserError
from pipeline.grading.coverage import coverage_rows
from pipeline.harness import kernel_layer
from pipeline.harness.episode import run_harness
from pipeline.harness.room_export import export_room
from pipeline.harness.trace import Trace
from pipeline.ids import bucket
from pipeline.llm.base import Backend, make_backend
from pipeline.llm.openai_backend import ServerUnavailable
from pipeline.policies import (
    Policy,
    base_policy,
    load_policy,
    register_policy,
    root_backend_config,
    serve_policy,
)
from pipeline.rooms import store
from pipeline.rooms.model import Room
from pipeline.rooms.probes import ProbeIndex
from pipeline.trace_store import TraceRows, TraceWriter, trace_rows, trajectory_id

Finished = tuple[TraceRows, list[dict]]  # a trajectory's packed rows and its coverage rows
EXECUTORS = ("local", "ray")


@dataclass
class Job:
    """One trajectory to sample: its key and the seed derived from it."""

    room: str
    sample_index: int
    trajectory_id: str
    seed: int


@dataclass
class Work:
    """What an executor runs: a policy's missing jobs over rooms loaded and exported once."""

    policy: Policy
    jobs: list[Job]
    rooms: dict[str, Room]
    dirs: dict[str, Path]  # each room exported for the REPL workers
    purpose: str


def resolve_policy(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig) -> Policy:
    """``sample.policy`` when set, else the recipe's base policy (registered)."""
    if cfg.sample.policy:
        return load_policy(con, cfg.sample.policy, field="sample.policy")
    policy = base_policy(cfg)
    register_policy(con, policy)
    return policy


def rooms_to_sample(con: duckdb.DuckDBPyConnection, split: str) -> list[str]:
    rooms = store.room_names(con, split=split)
    if not rooms:
        raise UserError(f"no rooms in split {split!r}: run `python -m pipeline rooms generate` first")
    return rooms


def missing_jobs(
    con: duckdb.DuckDBPyConnection,
    policy_id: str,
    rooms: list[str],
    k: int,
    purpose: str,
    seed: int,
    first: int = 0,
) -> list[Job]:
    """The jobs of sample indices ``first .. first + k - 1`` of each room that have no trajectory yet."""
    have = {
        (r, i)
        for r, i in con.execute(
            "select room_id, sample_index from trajectories where policy_id = ? and purpose = ?",
            [policy_id, purpose],
        ).fetchall()
    }
    jobs = []
    for room in rooms:
        for i in range(first, first + k):
            if (room, i) not in have:
                tid = trajectory_id(policy_id, room, purpose, i)
                # the seed names (room, purpose, index), not the policy: every policy's i-th episode of a
                # room shares it, so a held-out comparison pairs the same room and seed
                jobs.append(Job(room, i, tid, bucket(f"{seed}|{room}|{purpose}|{i}", 1 << 32)))
    return jobs


# --------------------------------------------------------------------------- one trajectory


async def run_trajectory(
    cfg: PipelineConfig, room: Room, room_dir: Path, root: Backend, sub: Backend, policy: Policy, job: Job
) -> Trace:
    """One episode of ``policy`` on ``room``, with the harness and sampling the policy records."""
    harness = dataclasses.replace(cfg.harness, kind=policy.harness, prompt=policy.prompt)
    sampling = dataclasses.replace(cfg.sampling, **policy.sampling)
    return await run_harness(
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


def error_trace(job: Job, policy: Policy, exc: BaseException, t0: float) -> Trace:
    """The trace of an episode whose harness raised: recorded, so the run goes on."""
    return Trace(
        trajectory_id=job.trajectory_id,
        room=job.room,
        policy_id=policy.policy_id,
        harness=policy.harness,
        status="error",
        end_reason=f"{type(exc).__name__}: {exc}"[:2000],
        started_at=datetime.now(UTC).replace(tzinfo=None).isoformat(),
        wall_s=time.monotonic() - t0,
    )


def finished_rows(
    trace: Trace, room: Room, index: ProbeIndex, job: Job, policy_id: str, purpose: str
) -> Finished:
    """A finished trajectory's warehouse rows and coverage, computed where it finished."""
    rows = trace_rows(
        trace, room_id=room.room_id, policy_id=policy_id, sample_index=job.sample_index, purpose=purpose
    )
    return rows, coverage_rows(trace, room, index)


def export_dir(cfg: PipelineConfig, room: Room) -> Path:
    """The room as files the REPL worker reads (exported once per run folder)."""
    return export_room(room, Path(cfg.run.dir) / "room_exports" / room.name)


# --------------------------------------------------------------------------- many trajectories


def sample_policy(
    con: duckdb.DuckDBPyConnection,
    cfg: PipelineConfig,
    policy: Policy,
    rooms: list[str],
    k: int,
    purpose: str,
    desc: str = "sample",
    first_index: int = 0,
) -> dict[str, int]:
    """Sample indices ``first_index .. first_index + k - 1`` of every (room, policy, purpose), those not
    sampled yet (by default: top each up to k trajectories); returns counts."""
    if cfg.sample.executor not in EXECUTORS:
        raise UserError(
            f"sample.executor: unknown executor {cfg.sample.executor!r} ({' | '.join(EXECUTORS)})"
        )
    if (
        policy.harness == "rlm"
    ):  # refuse before any work when the sandbox would run below the recipe's minimum
        kernel_layer.resolve_level(cfg.harness.sandbox_level, cfg.harness.min_sandbox_level)
    jobs = missing_jobs(con, policy.policy_id, rooms, k, purpose, cfg.run.seed, first_index)
    counts = {"planned": len(rooms) * k, "existing": len(rooms) * k - len(jobs), "sampled": 0, "failed": 0}
    if not jobs:
        return counts
    serve_policy(policy, cfg)
    loaded = {name: store.load_room(con, name) for name in sorted({j.room for j in jobs})}
    work = Work(policy, jobs, loaded, {name: export_dir(cfg, room) for name, room in loaded.items()}, purpose)
    bar = tqdm(total=len(jobs), desc=desc, unit="traj")
    writer = TraceWriter(con)

    def ingest(finished: list[Finished]) -> None:
        """Commit trajectories that have finished, whole, in one transaction: a kill loses only those in flight."""
        for rows, coverage in finished:
            writer.add(rows, coverage)
            counts["failed"] += rows.status == "error"
        counts["sampled"] += writer.flush()
        bar.update(len(finished))
        bar.set_postfix(done=counts["sampled"], failed=counts["failed"])

    try:
        if cfg.sample.executor == "ray":
            run_ray(cfg, work, ingest)
        else:
            asyncio.run(run_local(cfg, work, ingest))
    finally:
        bar.close()
    return counts


async def run_local(cfg: PipelineConfig, work: Work, ingest: Callable[[list[Finished]], None]) -> None:
    """Every job in this process, ``sample.concurrency`` episodes at a time, sharing two backends."""
    policy, rooms, dirs, purpose = work.policy, work.rooms, work.dirs, work.purpose
    indexes = {name: ProbeIndex(room.probes) for name, room in rooms.items()}
    root = make_backend(root_backend_config(policy, cfg))
    sub = make_backend(cfg.models.subagent)
    gate = asyncio.Semaphore(cfg.sample.concurrency)

    async def one(job: Job) -> None:
        async with gate:
            t0 = time.monotonic()
            try:
                trace = await run_trajectory(cfg, rooms[job.room], dirs[job.room], root, sub, policy, job)
            except ServerUnavailable:
                raise  # stop the run: trajectories already written stay, the next run samples the rest
            except Exception as exc:  # the harness should not raise; if it does, record it
                trace = error_trace(job, policy, exc, t0)
            # synchronous: one writer, one transaction per trajectory
            ingest([finished_rows(trace, rooms[job.room], indexes[job.room], job, policy.policy_id, purpose)])

    try:
        await asyncio.gather(*(one(j) for j in work.jobs))
    finally:
        for b in (root, sub):
            await b.aclose()


# --------------------------------------------------------------------------- Ray executor
# Ray workers never touch DuckDB (one writing process): each task runs one
# trajectory in its own process — its own backends, its own REPL worker — and
# returns the trajectory's packed rows and coverage, so the driver only hands
# them to its writer: every result that is ready is committed in one
# transaction (group commit, so many workers do not queue behind one commit
# each). A worker that dies loses only its own trajectory (Ray retries the task
# up to twice; anything still missing is sampled by the next run, since the
# sampler tops up to k). Install with `pip install -e '.[ray]'`.


def _ray_trajectory(
    cfg_dict: dict, policy: dict, job: dict, room: Room, room_dir: str, purpose: str
) -> Finished:
    """One trajectory in a Ray worker (backends are resolved by name there: see pipeline.llm.base)."""
    from pipeline.config import config_from_dict

    cfg = config_from_dict(cfg_dict)
    pol, one = Policy(**policy), Job(**job)
    root = make_backend(root_backend_config(pol, cfg))
    sub = make_backend(cfg.models.subagent)

    async def go() -> Trace:
        try:
            return await run_trajectory(cfg, room, Path(room_dir), root, sub, pol, one)
        finally:
            for b in (root, sub):
                await b.aclose()

    trace = asyncio.run(go())
    return finished_rows(trace, room, ProbeIndex(room.probes), one, pol.policy_id, purpose)


def run_ray(cfg: PipelineConfig, work: Work, ingest: Callable[[list[Finished]], None]) -> None:
    """Every job as a Ray task; results that are ready together are ingested together."""
    try:
        import ray
    except ImportError as exc:
        raise UserError("sample.executor=ray needs Ray: pip install -e '.[ray]'") from exc
    if not ray.is_initialized():
        import os

        # The project's own settings (RLM_*: model cache, ...) and the import path reach the workers.
        env = {k: v for k, v in os.environ.items() if k.startswith("RLM_") or k == "PYTHONPATH"}
        ray.init(
            num_cpus=max(1, cfg.sample.concurrency),
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": env},
        )
    task = ray.remote(max_retries=2)(_ray_trajectory)
    cfg_dict = cfg.to_dict()
    pol = dataclasses.asdict(work.policy)
    room_refs = {name: ray.put(room) for name, room in work.rooms.items()}
    pending = {
        task.remote(
            cfg_dict, pol, dataclasses.asdict(j), room_refs[j.room], str(work.dirs[j.room]), work.purpose
        ): j
        for j in work.jobs
    }
    while pending:
        ray.wait(list(pending), num_returns=1)  # block until one is ready, then take every ready one
        done, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
        finished = []
        for ref in done:
            job = pending.pop(ref)
            try:
                finished.append(ray.get(ref))
            except Exception as exc:  # the task died after its retries: record nothing, the next run tops up
                print(f"ray: trajectory {job.trajectory_id} failed: {exc}")
        if finished:
            ingest(finished)  # group commit: with many workers, one transaction per ready batch
