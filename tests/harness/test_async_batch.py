"""llm_batch_async: subagents read while the cell, and the root's next turn, go on.

Real episodes (the sandboxed REPL, the extractive reader slowed down so its answers are still out when
the next turn starts) with a scripted root.
"""

from __future__ import annotations

import asyncio

import pytest

from pipeline import db
from pipeline.config import BackendConfig, HarnessConfig, SamplingConfig
from pipeline.harness.room_export import export_room
from pipeline.harness.root import run_episode
from pipeline.llm.base import make_backend
from pipeline.rooms.synthetic.generator import generate_room
from pipeline.trace_store import TraceWriter, trace_rows, trajectory_id
from tests.doubles import ScriptedBackend

DELAY_S = 1.0


class SlowReader:
    """The extractive reader, answering each prompt ``DELAY_S`` late (a subagent model takes seconds)."""

    def __init__(self) -> None:
        self.inner = make_backend(BackendConfig(kind="extractive"))
        self.name, self.context_tokens = self.inner.name, self.inner.context_tokens

    async def complete(self, messages, params):
        await asyncio.sleep(DELAY_S)
        return await self.inner.complete(messages, params)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture(scope="module")
def room():
    return generate_room("async-test", seed=5, n_documents=6, tokens_per_document=200)


@pytest.fixture(scope="module")
def room_dir(room, tmp_path_factory):
    return export_room(room, tmp_path_factory.mktemp("rooms") / room.name)


def _episode(room, room_dir, turns: list[str], policy_id: str = "p-async"):
    root = ScriptedBackend([f"```python\n{t}\n```" for t in turns])
    return asyncio.run(
        run_episode(
            room,
            room_dir,
            root,
            SlowReader(),
            HarnessConfig(prompt="base", max_turns=3),
            SamplingConfig(max_new_tokens=1024),
            trajectory_id=trajectory_id(policy_id, room.name, "train", 0),
            policy_id=policy_id,
        )
    )


START = 'pending = llm_batch_async([f"=== {d.path} ===\\n{d.text}" for d in room.documents])\nprint(pending.done(), len(pending))'


def test_the_root_writes_its_memo_while_the_subagents_read(room, room_dir, tmp_path):
    trace = _episode(
        room,
        room_dir,
        [
            START,
            'memo = "# Diligence memo\\nDrafted while the subagents were still reading the room."\n'
            "answers = pending.result()\n"
            'print(pending.done(), sum(x.startswith("{") for a in answers for x in a.splitlines()))\n'
            'submit(memo + "\\n" + "\\n".join(answers))',
        ],
    )
    assert trace.status == "submitted", trace.end_reason
    first, second = trace.turns
    assert first.output.strip() == f"False {len(room.documents)}"  # returned at once, nothing back yet
    assert second.output.strip().startswith("True ")
    calls = trace.subcalls
    assert len(calls) == len(room.documents) and all(c.error is None and c.turn_index == 0 for c in calls)
    # the answers came back while the root's second turn (the one that began the memo) was under way
    assert max(c.returned_s for c in calls) > second.started_s
    assert trace.memo.count("{") >= 1  # the answers reached the memo

    con = db.connect(tmp_path / "w.duckdb")
    w = TraceWriter(con)
    w.add(trace_rows(trace, room_id=room.name, policy_id="p-async", sample_index=0, purpose="train"))
    w.flush()
    (flag,) = con.execute("select memo_before_delegation_done from stg_trajectories").fetchone()
    con.close()
    assert flag is True


def test_llm_batch_waits_so_its_memo_is_not_written_during_delegation(room, room_dir, tmp_path):
    trace = _episode(
        room,
        room_dir,
        [
            'answers = llm_batch([f"=== {d.path} ===\\n{d.text}" for d in room.documents])',
            'memo = "# Diligence memo\\nWritten once every subagent answer was back."\nsubmit(memo)',
        ],
        policy_id="p-sync",
    )
    assert trace.status == "submitted"
    assert max(c.returned_s for c in trace.subcalls) < trace.turns[1].started_s
    con = db.connect(tmp_path / "w.duckdb")
    w = TraceWriter(con)
    w.add(trace_rows(trace, room_id=room.name, policy_id="p-sync", sample_index=0, purpose="train"))
    w.flush()
    assert con.execute("select memo_before_delegation_done from stg_trajectories").fetchone() == (False,)
    con.close()


def test_a_batch_never_waited_for_is_cancelled_when_the_episode_ends(room, room_dir):
    trace = _episode(room, room_dir, [START + '\nsubmit("# Diligence memo\\nNothing read.")'])
    assert trace.status == "submitted"
    assert trace.subcalls and all(c.error == "cancelled" for c in trace.subcalls)


def test_a_handle_the_host_never_gave_is_an_error_item(room, room_dir):
    trace = _episode(
        room,
        room_dir,
        [
            "p = llm_batch_async(['=== a.txt ===\\nText.'])\n"
            "p._started = [(7, [0])]\n"  # the cell's own object: it can name any handle, the host checks
            "print(p.result())\n"
            "p._waiting = True\n"
            "p.done()",
        ],
    )
    first = trace.turns[0]
    assert "ERROR" in first.output and "no llm_batch_async batch has handle 7" in first.output  # result()
    assert "RuntimeError" in first.error and "no llm_batch_async batch has handle 7" in first.error  # done()


def test_prompts_of_the_wrong_type_are_a_cell_error(room, room_dir):
    trace = _episode(room, room_dir, ["llm_batch_async(['ok', 3])"])
    assert "llm_batch_async(prompts): prompts[1] is a int, expected str" in (trace.turns[0].error or "")


def test_batches_past_the_limit_are_refused_not_kept(room, room_dir, monkeypatch):
    # a cell can loop llm_batch_async as fast as it likes: the host holds a task per batch, so it caps them
    from pipeline.harness import root

    monkeypatch.setattr(root, "MAX_ASYNC_BATCHES", 2)
    trace = _episode(
        room,
        room_dir,
        [
            "ps = [llm_batch_async(['=== a.txt ===\\nText.']) for _ in range(3)]\n"
            "print([p.result()[0] for p in ps])"
        ],
    )
    out = trace.turns[0].output
    assert "2 batches started in this episode, the limit" in out
    assert out.count("the limit") == 1  # the first two ran
    assert len(trace.subcalls) == 2
