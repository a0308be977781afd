"""Whole trajectories with a real root model: in-process SmolLM2, and the same over HTTP.

The small model is not expected to succeed; these tests check that a real
model's trajectory is recorded completely, whatever it wrote.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from pipeline.config import BackendConfig, HarnessConfig, SamplingConfig
from pipeline.harness.room_export import export_room
from pipeline.harness.root import run_episode
from pipeline.harness.trace import STATUSES, Trace
from pipeline.llm.base import make_backend
from pipeline.rooms.synthetic.generator import generate_room

pytestmark = pytest.mark.slow

# One turn plus the one request for a memo, short completions: the machine is small and shared.
HARNESS = HarnessConfig(prompt="worked_example", max_turns=1, episode_timeout_s=600.0, max_subcalls=4)
SAMPLING = SamplingConfig(temperature=0.8, top_p=0.95, max_new_tokens=64)


@pytest.fixture(scope="module")
def room():
    return generate_room("e2e", seed=21, n_documents=6, tokens_per_document=200)


@pytest.fixture(scope="module")
def room_dir(room, tmp_path_factory):
    return export_room(room, tmp_path_factory.mktemp("rooms") / room.name)


def assert_complete(trace: Trace, root_name: str) -> None:
    assert trace.status in STATUSES
    assert trace.status != "error", trace.end_reason
    assert trace.end_reason
    assert 1 <= len(trace.turns) <= HARNESS.max_turns + 1
    first = trace.turns[0]
    assert [m["role"] for m in first.new_messages][0] == "system"
    assert any(m.get("example") for m in first.new_messages)
    for prev, turn in zip(trace.turns, trace.turns[1:], strict=False):
        assert turn.new_messages and turn.started_s >= prev.ended_s
    for t in trace.turns:
        assert t.completion_tokens > 0 and t.prompt_tokens > 0
        assert t.started_s <= t.ended_s <= trace.wall_s
    # Root and subagents may be the same served model: usage is per model name.
    sub_calls = sum(1 for c in trace.subcalls if c.model == root_name and c.response is not None)
    assert trace.usage[root_name]["calls"] == len(trace.turns) + sub_calls
    if trace.status in ("submitted", "turn_limit"):
        assert trace.memo is not None
    assert Trace.from_dict(json.loads(json.dumps(trace.to_dict()))) == trace


def test_local_root_with_extractive_subagents(room, room_dir, smollm2_path):
    root = make_backend(BackendConfig(kind="local", model=str(smollm2_path), max_batch=1))
    sub = make_backend(BackendConfig(kind="extractive"))
    try:
        trace = asyncio.run(
            run_episode(
                room, room_dir, root, sub, HARNESS, SAMPLING, trajectory_id="e2e-local", policy_id="p", seed=1
            )
        )
    finally:
        asyncio.run(root.aclose())
    assert_complete(trace, root.name)


def test_root_and_subagents_over_http(room, room_dir, transformers_server):
    cfg = BackendConfig(
        kind="openai",
        base_url=transformers_server.base_url,
        model=transformers_server.model,
        concurrency=2,
        timeout_s=120.0,
        max_retries=1,
    )
    root = make_backend(cfg)
    sub = make_backend(cfg)
    harness = HarnessConfig(
        prompt="worked_example",
        max_turns=1,
        episode_timeout_s=600.0,
        max_subcalls=4,
        subagent_max_new_tokens=32,
        batch_concurrency=2,
    )

    async def go():
        try:
            return await run_episode(
                room, room_dir, root, sub, harness, SAMPLING, trajectory_id="e2e-http", policy_id="p", seed=2
            )
        finally:
            await root.aclose()
            await sub.aclose()

    trace = asyncio.run(go())
    assert_complete(trace, root.name)
    for c in trace.subcalls:  # whatever the root delegated went over HTTP and came back
        assert c.model and (c.response is not None or c.error)
