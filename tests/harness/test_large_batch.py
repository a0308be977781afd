"""A room whose prompts outgrow one frame: llm_batch streams it in parts, budgets fit the room.

Before, one llm_batch of a room's chunks was one frame, and a room of a few
hundred long documents (over 64 MiB of prompts) failed with "request of N MiB
is over the 64 MiB limit"; the fixed 2,000-call budget could not cover it
either.
"""

from __future__ import annotations

import asyncio

import pytest

from pipeline.config import BackendConfig, HarnessConfig, SamplingConfig
from pipeline.grading.coverage import coverage_rows
from pipeline.harness.room_export import export_room
from pipeline.harness.root import run_episode
from pipeline.harness.subagents import room_budgets
from pipeline.harness.worker import MAX_FRAME_BYTES
from pipeline.llm.base import make_backend
from pipeline.rooms.synthetic.generator import generate_room
from tests.doubles import ScriptedBackend
from tests.harness.test_root import read_everything_program


@pytest.mark.slow
def test_one_llm_batch_larger_than_a_frame_covers_the_room(tmp_path):
    room = generate_room("big-batch", seed=3, n_documents=300, tokens_per_document=60_000)
    room_dir = export_room(room, tmp_path / room.name)
    harness = HarnessConfig(prompt="worked_example", max_turns=1, cell_timeout_s=600, episode_timeout_s=1800)
    trace = asyncio.run(
        run_episode(
            room,
            room_dir,
            ScriptedBackend([read_everything_program()]),
            make_backend(BackendConfig(kind="extractive", concurrency=64)),
            harness,
            SamplingConfig(),
            trajectory_id="t-big",
            policy_id="p",
        )
    )
    assert trace.status == "submitted", trace.end_reason
    sent = sum(len(c.prompt.encode()) for c in trace.subcalls)
    assert sent > MAX_FRAME_BYTES, f"only {sent >> 20} MiB of prompts: not larger than one frame"
    assert all(c.error is None for c in trace.subcalls)
    # Every chunk was one call, in the program's order, within the budget derived from the room.
    assert len(trace.subcalls) > 2000 and len(trace.subcalls) <= room_budgets(room.n_tokens, 300, 0, 0)[0]
    total = next(
        r for r in coverage_rows(trace, room) if r["scope"] == "subagent" and r["grouping"] == "total"
    )
    assert total["n_seen"] / total["n_probes"] >= 0.99, total
