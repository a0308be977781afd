"""Stage `sample`: root trajectories for a policy over a split, into the warehouse.

    python -m pipeline --recipe tiny sample [sample.k=8 sample.split=train]

Tops every (room, policy) up to ``sample.k`` trajectories. Each trajectory is
written in ONE transaction when it ends (trajectory row, turns, subagent
calls, coverage), so a run killed at any moment — SIGKILL included — loses
only the trajectories in flight, and the next run finishes exactly the
missing sample indices (the unique key (room, policy, purpose, index) makes
duplicates impossible). Only this driver process writes DuckDB: REPL workers
read an exported copy of the room, and with ``sample.executor=ray`` Ray
tasks return traces that the driver ingests.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow as pa
from tqdm import tqdm

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.grading.coverage import coverage_rows
from pipeline.harness.trace import Subcall, Trace, Turn
from pipeline.llm.base import make_backend
from pipeline.policies import Policy, base_policy, load_policy, register_policy, root_backend_config
from pipeline.rooms import store
from pipeline.rooms.model import Room
from pipeline.rooms.probes import ProbeIndex


@dataclass
class Job:
    room: str
    sample_index: int
    trajectory_id: str
    seed: int


def trajectory_id(policy_id: str, room: str, purpose: str, index: int) -> str:
    h = hashlib.sha256(f"{policy_id}|{room}|{purpose}|{index}".encode()).hexdigest()[:16]
    return f"t-{h}"


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


# --------------------------------------------------------------------------- rows


def _findings(trace: Trace) -> tuple[int, int]:
    """(finding lines from subagents, of which appear verbatim in the memo)."""
    memo = trace.memo or ""
    n = carried = 0
    for call in trace.subcalls:
        if call.error or not call.response:
            continue
        for line in call.response.splitlines():
            line = line.strip()
            if len(line) < 20 or line.startswith("ERROR") or line.lower().startswith("no diligence"):
                continue
            n += 1
            carried += line in memo
    return n, carried


def trajectory_row(
    trace: Trace, room_id: str, policy_id: str, sample_index: int, purpose: str
) -> dict[str, Any]:
    """The `trajectories` row of one finished trajectory (behaviour metrics computed here, once)."""
    n_findings, n_carried = _findings(trace)
    calls = list(_all_subcalls(trace))
    returned = [c.returned_s for c in calls]
    return {
        "trajectory_id": trace.trajectory_id,
        "room_id": room_id,
        "policy_id": policy_id,
        "sample_index": sample_index,
        "purpose": purpose,
        "harness": trace.harness,
        "status": trace.status,
        "end_reason": trace.end_reason,
        "memo": trace.memo,
        "n_turns": len(trace.turns),
        "n_subcalls": len(calls),
        "root_prompt_tokens": sum(t.prompt_tokens for t in trace.turns),
        "root_completion_tokens": sum(t.completion_tokens for t in trace.turns),
        "sub_prompt_tokens": sum(c.prompt_tokens for c in calls),
        "sub_completion_tokens": sum(c.completion_tokens for c in calls),
        "wall_s": trace.wall_s,
        "delegated_chars": sum(len(c.prompt) for c in calls),
        "memo_chars": len(trace.memo or ""),
        "n_findings": n_findings,
        "n_findings_carried": n_carried,
        "memo_started_s": trace.memo_started_s,
        "last_subcall_returned_s": max(returned) if returned else None,
        "started_at": datetime.fromisoformat(trace.started_at) if trace.started_at else db.now(),
        "trace": trace.to_json(),
    }


class TraceWriter:
    """The sampler's writer: buffers whole trajectories, writes them column-wise.

    Rows are built as Arrow columns straight from the trace objects (one list
    comprehension per column) rather than as per-row dicts, because Python
    per-value work, not DuckDB, bounds ingest speed. ``flush`` writes every
    buffered trajectory with its turns, subagent calls and coverage in one
    transaction: a trajectory is in the warehouse whole or not at all.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con
        self.trajectories: list[dict[str, Any]] = []
        self.turns: list[tuple[str, Turn]] = []
        self.calls: list[tuple[str, int, Subcall]] = []
        self.coverage: list[dict[str, Any]] = []

    def add(self, trace: Trace, row: dict[str, Any], coverage: list[dict[str, Any]]) -> None:
        tid = trace.trajectory_id
        self.trajectories.append(row)
        self.turns.extend((tid, t) for t in trace.turns)
        self.calls.extend((tid, i, c) for i, c in enumerate(_all_subcalls(trace)))
        self.coverage.extend(coverage)

    def __len__(self) -> int:
        return len(self.trajectories)

    def _turn_table(self) -> pa.Table:
        ts = self.turns
        return pa.table(
            {
                "trajectory_id": [tid for tid, _ in ts],
                "turn_index": pa.array([t.index for _, t in ts], pa.int32()),
                "new_messages": [orjson.dumps(t.new_messages).decode() for _, t in ts],
                "completion": [t.completion for _, t in ts],
                "code": [t.code for _, t in ts],
                "output": [t.output for _, t in ts],
                "error": [t.error for _, t in ts],
                "prompt_tokens": pa.array([t.prompt_tokens for _, t in ts], pa.int32()),
                "completion_tokens": pa.array([t.completion_tokens for _, t in ts], pa.int32()),
                "started_s": pa.array([t.started_s for _, t in ts], pa.float64()),
                "ended_s": pa.array([t.ended_s for _, t in ts], pa.float64()),
            }
        )

    def _call_table(self) -> pa.Table:
        cs = self.calls
        return pa.table(
            {
                "trajectory_id": [tid for tid, _, _ in cs],
                "call_index": pa.array([i for _, i, _ in cs], pa.int32()),
                "turn_index": pa.array([c.turn_index for _, _, c in cs], pa.int32()),
                "depth": pa.array([c.depth for _, _, c in cs], pa.int32()),
                "parent_call": pa.array([c.parent_call for _, _, c in cs], pa.int32()),
                "model": [c.model for _, _, c in cs],
                "prompt": [c.prompt for _, _, c in cs],
                "response": [c.response for _, _, c in cs],
                "error": [c.error for _, _, c in cs],
                "prompt_tokens": pa.array([c.prompt_tokens for _, _, c in cs], pa.int32()),
                "completion_tokens": pa.array([c.completion_tokens for _, _, c in cs], pa.int32()),
                "latency_s": pa.array([c.latency_s for _, _, c in cs], pa.float64()),
                "issued_s": pa.array([c.issued_s for _, _, c in cs], pa.float64()),
                "returned_s": pa.array([c.returned_s for _, _, c in cs], pa.float64()),
            }
        )

    def flush(self) -> int:
        if not self.trajectories:
            return 0
        n = len(self.trajectories)
        with db.transaction(self.con):
            db.write_arrow(
                self.con, "trajectories", db.rows_to_arrow(self.con, "trajectories", self.trajectories)
            )
            db.write_arrow(self.con, "turns", self._turn_table())
            db.write_arrow(self.con, "subcalls", self._call_table())
            db.write_rows(self.con, "coverage", self.coverage)
        self.__init__(self.con)
        return n


def _all_subcalls(trace: Trace):
    yield from trace.subcalls
    for child in trace.children:
        yield from _all_subcalls(child)


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
    jobs = missing_jobs(con, policy.policy_id, rooms, k, purpose, cfg.run.seed)
    counts = {"planned": len(rooms) * k, "existing": len(rooms) * k - len(jobs), "sampled": 0, "failed": 0}
    if not jobs:
        return counts
    loaded = {name: store.load_room(con, name) for name in sorted({j.room for j in jobs})}
    indexes = {name: ProbeIndex(room.probes) for name, room in loaded.items()}
    dirs = {name: export_dir(cfg, room) for name, room in loaded.items()}
    bar = tqdm(total=len(jobs), desc=desc, unit="traj")

    writer = TraceWriter(con)

    def ingest(job: Job, trace: Trace) -> None:
        room = loaded[job.room]
        row = trajectory_row(trace, room.room_id, policy.policy_id, job.sample_index, purpose)
        writer.add(trace, row, coverage_rows(trace, room, indexes[job.room]))
        writer.flush()  # one transaction per finished trajectory: a kill loses only those in flight
        counts["sampled"] += 1
        counts["failed"] += trace.status == "error"
        bar.update(1)
        bar.set_postfix(done=counts["sampled"], failed=counts["failed"])

    try:
        if cfg.sample.executor == "ray":
            from pipeline.executors import run_ray

            run_ray(cfg, policy, jobs, loaded, dirs, ingest)
        elif cfg.sample.executor == "local":
            asyncio.run(_run_local(cfg, policy, jobs, loaded, dirs, ingest))
        else:
            raise ValueError(f"sample.executor: unknown executor {cfg.sample.executor!r} (local | ray)")
    finally:
        bar.close()
    return counts


async def _run_local(cfg, policy, jobs, loaded, dirs, ingest) -> None:
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
            ingest(job, trace)  # synchronous: one writer, one transaction per trajectory

    try:
        await asyncio.gather(*(one(j) for j in jobs))
    finally:
        for b in (root, sub):
            close = getattr(b, "aclose", None)
            if close:
                await close()


def run(cfg: PipelineConfig) -> dict:
    con = db.connect(cfg.run.db_path)
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
