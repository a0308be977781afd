"""Scale-out executor for the sampler: Ray tasks that return warehouse rows.

Ray workers never touch DuckDB (one writing process): each task runs one
trajectory in its own process — its own backends, its own REPL worker — and
returns the trajectory's warehouse rows and coverage, computed in the worker
(pipeline.trace_store.trace_rows), so the driver only hands packed buffers
to its writer: every result that is ready is committed in one transaction
(group commit, so many workers do not queue behind one commit each). A worker
that dies loses only its own trajectory (Ray retries the task up to
``max_retries``; anything still missing is sampled by the next run, since
the sampler tops up to k).
Install with `pip install -e '.[ray]'`; `sample.executor=ray` selects it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path

from pipeline.config import PipelineConfig
from pipeline.harness.trace import Trace
from pipeline.policies import Policy
from pipeline.rooms.model import Room


def _one_trajectory(cfg_dict: dict, policy: dict, job: dict, room: Room, room_dir: str, purpose: str):
    import importlib
    import os

    # Backends registered outside the package (a team's own, or the test doubles)
    # must be imported in the Ray worker too: RLM_EXTRA_BACKENDS=mod1,mod2
    for module in filter(None, os.environ.get("RLM_EXTRA_BACKENDS", "").split(",")):
        importlib.import_module(module)
    from pipeline.config import load_config
    from pipeline.llm.base import make_backend
    from pipeline.policies import root_backend_config
    from pipeline.rooms.probes import ProbeIndex
    from stages.sample import Job, _episode, finished_rows

    cfg = load_config(None)
    _fill(cfg, cfg_dict)
    pol = Policy(**policy)
    root = make_backend(root_backend_config(pol, cfg))
    sub = make_backend(cfg.models.subagent)

    async def go() -> Trace:
        try:
            return await _episode(cfg, room, Path(room_dir), root, sub, pol, Job(**job))
        finally:
            for b in (root, sub):
                await b.aclose()

    trace = asyncio.run(go())
    return finished_rows(trace, room, ProbeIndex(room.probes), Job(**job), pol.policy_id, purpose)


def _fill(obj, data: dict) -> None:
    for k, v in data.items():
        cur = getattr(obj, k)
        if dataclasses.is_dataclass(cur):
            _fill(cur, v)
        else:
            setattr(obj, k, v)


def run_ray(
    cfg: PipelineConfig,
    policy: Policy,
    jobs: list,
    rooms: dict[str, Room],
    dirs: dict[str, Path],
    purpose: str,
    ingest: Callable,
) -> None:
    try:
        import ray
    except ImportError as exc:
        raise RuntimeError("sample.executor=ray needs Ray: pip install -e '.[ray]'") from exc
    if not ray.is_initialized():
        import os

        # The project's own settings (RLM_*: extra backends, model cache, ...) reach the workers.
        env = {k: v for k, v in os.environ.items() if k.startswith("RLM_") or k == "PYTHONPATH"}
        ray.init(
            num_cpus=max(1, cfg.sample.concurrency),
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": env},
        )
    task = ray.remote(max_retries=2)(_one_trajectory)
    cfg_dict = cfg.to_dict()
    pol = dataclasses.asdict(policy)
    room_refs = {name: ray.put(room) for name, room in rooms.items()}
    pending = {
        task.remote(cfg_dict, pol, dataclasses.asdict(j), room_refs[j.room], str(dirs[j.room]), purpose): j
        for j in jobs
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
