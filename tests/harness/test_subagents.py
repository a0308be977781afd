"""SubagentRunner: order, concurrency, ERROR items, budgets, hostile input, trace records."""

from __future__ import annotations

import asyncio
import time

import pytest

from pipeline.harness.subagents import SubagentRunner
from pipeline.llm.base import Completion, ContextLimitError, GenerationParams


class EchoBackend:
    """Answers "re: <prompt>" after a delay that shrinks with the index, so completion order != issue order."""

    name = "echo"
    context_tokens = 1000

    def __init__(self, delay: float = 0.02):
        self.delay = delay
        self.in_flight = 0
        self.max_in_flight = 0
        self.messages: list[list[dict]] = []

    async def complete(self, messages, params):
        self.messages.append(messages)
        prompt = messages[-1]["content"]
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if prompt.startswith("boom"):
                raise RuntimeError("backend exploded")
            if prompt.startswith("huge"):
                raise ContextLimitError("prompt of 5000 tokens exceeds the 1000-token context of echo")
            await asyncio.sleep(self.delay / (1 + len(prompt) % 5))
            return Completion(text=f"re: {prompt}", prompt_tokens=10, completion_tokens=5, model="echo")
        finally:
            self.in_flight -= 1

    async def aclose(self):
        pass


def runner(backend, **kw) -> SubagentRunner:
    opts = dict(concurrency=4, max_calls=100, max_tokens=10_000, t0=time.monotonic())
    opts.update(kw)
    return SubagentRunner(backend, GenerationParams(max_tokens=32), **opts)


def test_batch_keeps_order_and_limits_concurrency():
    b = EchoBackend()
    r = runner(b)
    r.turn_index = 2
    prompts = [f"p{i}" + "x" * i for i in range(20)]
    out = asyncio.run(r.batch(prompts))
    assert out == [f"re: {p}" for p in prompts]
    assert b.max_in_flight == 4
    assert [c.index for c in r.subcalls] == list(range(20))
    assert [c.prompt for c in r.subcalls] == prompts
    c = r.subcalls[3]
    assert (c.turn_index, c.depth, c.model, c.response, c.error) == (2, 1, "echo", f"re: {prompts[3]}", None)
    assert (c.prompt_tokens, c.completion_tokens) == (10, 5)
    assert 0 <= c.issued_s < c.returned_s and c.latency_s == pytest.approx(c.returned_s - c.issued_s)
    assert r.tokens_used == 20 * 15 and r.budget_exceeded is None


def test_failed_items_become_error_strings():
    r = runner(EchoBackend())
    out = asyncio.run(r.batch(["ok", "boom now", "huge doc", 42, "fine"]))
    assert out[0] == "re: ok" and out[4] == "re: fine"
    assert out[1] == "ERROR: RuntimeError: backend exploded"
    assert out[2].startswith("ERROR: prompt refused: prompt of 5000 tokens")
    assert out[3] == "ERROR: prompt must be a str, got int"
    # The non-str item was never issued; the failed ones are recorded with their error.
    assert [c.prompt for c in r.subcalls] == ["ok", "boom now", "huge doc", "fine"]
    assert r.subcalls[1].error == "RuntimeError: backend exploded" and r.subcalls[1].response is None
    assert r.subcalls[2].error.startswith("context limit:")


def test_call_budget():
    r = runner(EchoBackend(), max_calls=3)
    out = asyncio.run(r.batch(["a", "b", "c", "d", "e"]))
    assert out[:3] == ["re: a", "re: b", "re: c"]
    assert out[3] == out[4]
    assert out[3].startswith("ERROR: subagent call budget exhausted (max_subcalls=3): all 3 calls")
    assert "none left" in out[3]
    assert r.budget_exceeded == "max_subcalls" and len(r.subcalls) == 3
    assert asyncio.run(r.query("f")).startswith("ERROR: subagent call budget exhausted")


def test_token_budget():
    r = runner(EchoBackend(), max_tokens=40)  # each call uses 15 tokens
    first = asyncio.run(r.batch(["a", "b"]))
    assert first == ["re: a", "re: b"] and r.budget_exceeded is None
    # 30 used + two 1-token prompts fit; their completions overshoot (documented), then all is refused.
    assert asyncio.run(r.batch(["c", "d"])) == ["re: c", "re: d"]
    assert r.budget_exceeded == "max_subcall_tokens" and r.tokens_used == 60
    out = asyncio.run(r.batch(["e"]))
    assert out[0].startswith("ERROR: subagent token budget exhausted (max_subcall_tokens=40): 60 tokens used")
    assert "0 left, this prompt needs about 1" in out[0]  # what is left, so the root can plan around it
    assert len(r.subcalls) == 4
    # A single prompt bigger than the remaining budget is refused before it is sent.
    r2 = runner(EchoBackend(), max_tokens=40)
    assert asyncio.run(r2.query("z" * 400)).startswith("ERROR: subagent token budget exhausted")
    assert r2.subcalls == []


def test_hostile_input_is_refused_clearly():
    r = runner(EchoBackend(), max_batch_prompts=10)
    with pytest.raises(TypeError, match="prompts must be a list of str, got str"):
        asyncio.run(r.batch("not a list"))
    with pytest.raises(ValueError, match="11 prompts in one batch; the limit is 10"):
        asyncio.run(r.batch(["x"] * 11))
    assert asyncio.run(r.batch([])) == []
    assert asyncio.run(r.query(None)) == "ERROR: prompt must be a str, got NoneType"


def test_system_prompt_and_query():
    b = EchoBackend()
    r = runner(b, system_prompt="You read documents.", depth=2)
    assert asyncio.run(r.query("hello")) == "re: hello"
    assert b.messages[0] == [{"role": "system", "content": "You read documents."},
                             {"role": "user", "content": "hello"}]  # fmt: skip
    assert r.subcalls[0].depth == 2


def test_timestamps_are_relative_to_t0_and_overlap():
    t0 = time.monotonic() - 5.0  # the trajectory started 5 s ago
    r = runner(EchoBackend(delay=0.05), t0=t0, concurrency=8)
    asyncio.run(r.batch(["a", "b", "c", "d"]))
    issued = [c.issued_s for c in r.subcalls]
    assert all(s >= 5.0 for s in issued)
    # All four were in flight together: each was issued before the first returned.
    assert max(issued) < min(c.returned_s for c in r.subcalls)


def test_runner_survives_successive_event_loops():
    b = EchoBackend()
    r = runner(b, concurrency=2)
    for _ in range(2):  # contention on the semaphore in two different loops
        assert asyncio.run(r.batch(["a", "b", "c", "d"])) == ["re: a", "re: b", "re: c", "re: d"]
    assert b.max_in_flight == 2 and len(r.subcalls) == 8


def test_budgets_follow_the_room_unless_set():
    from pipeline.harness.subagents import room_budgets

    # a default-recipe room keeps the old floor
    assert room_budgets(12_000, 20, 0, 0) == (2000, 4_000_000)
    # the mission's largest room: enough to read it twice in 2,000-token chunks, and 3x its tokens
    calls, tokens = room_budgets(80_000_000, 5000, 0, 0)
    assert calls == 2 * (40_000 + 5000) and tokens == 240_000_000
    # explicit recipe values win
    assert room_budgets(80_000_000, 5000, 7, 9) == (7, 9)
