"""Host-side subagent runner: serves ``llm_query`` / ``llm_batch`` calls from the REPL.

The root's code runs in a sandbox process; its subagent calls come back to
the host and land here. A ``SubagentRunner`` belongs to one trajectory: it
runs prompts against the subagent backend at most ``concurrency`` at a time,
keeps the order of a batch, enforces the trajectory's budgets (calls and
prompt+completion tokens) and records every issued call as a
``pipeline.harness.trace.Subcall`` (times relative to ``t0``, a
``time.monotonic()`` reading taken when the trajectory started).

A failing item never fails the batch: an exception, a context-limit refusal
or an exhausted budget comes back as the string ``"ERROR: <reason>"`` in that
item's place. Input from the REPL is hostile, so the shape is checked: a
batch must be a list (or tuple) of at most ``max_batch_prompts`` items, and
an item that is not a string is an ERROR item. Budgets are reserved in prompt
order when a batch arrives (a prompt's tokens estimated with
``count_tokens``), so which items of an over-budget batch run is
deterministic; in-flight calls may overshoot the token budget by their
completions, after which every later call is refused.
"""

from __future__ import annotations

import asyncio
import time

from pipeline.harness.trace import Subcall
from pipeline.llm.base import Backend, ContextLimitError, GenerationParams
from pipeline.rooms.model import count_tokens

# Most prompts in one batch request. The worker sends an llm_batch in parts
# of at most worker.BATCH_PART_PROMPTS (4096), so only a hostile worker comes
# near it; the sandbox host checks the same bound on every request it reads.
MAX_BATCH_PROMPTS = 10_000
ERROR_PREFIX = "ERROR: "


def calls_exhausted(max_calls: int) -> str:
    """The REPL's answer to a call over the trajectory's call budget: what is left and what to do."""
    return (
        f"{ERROR_PREFIX}subagent call budget exhausted (max_subcalls={max_calls}): all {max_calls:,} calls "
        "of this trajectory are used, none left; send fewer, larger prompts (e.g. d.chunks(8000))"
    )


def room_budgets(
    n_tokens: int, n_documents: int, max_calls: int, max_tokens: int, share: float = 0.0
) -> tuple[int, int]:
    """(calls, tokens) for one trajectory over a room: explicit values as given, 0 = from the room's size.

    Derived budgets cover reading the room about twice in 2,000-token
    chunks (the worked example's size), and never fall below the old fixed
    defaults (2,000 calls, 4M tokens): a 5,000-document, 80M-token room gets
    about 90,000 calls and 240M tokens. ``share`` > 0 (harness.budget_share)
    sets the token budget to that share of the room's tokens instead: below
    1, reading everything is impossible and what to read first is the root's
    decision.
    """
    chunks = -(-n_tokens // 2000) + n_documents
    calls = max_calls if max_calls > 0 else max(2000, 2 * chunks)
    if max_tokens > 0:
        tokens = max_tokens
    elif share > 0:
        tokens = max(1, round(share * n_tokens))
    else:
        tokens = max(4_000_000, 3 * n_tokens)
    return calls, tokens


class SubagentRunner:
    def __init__(
        self,
        backend: Backend,
        params: GenerationParams,
        *,
        concurrency: int,
        max_calls: int,
        max_tokens: int,
        t0: float,
        depth: int = 1,
        system_prompt: str | None = None,
        max_batch_prompts: int = MAX_BATCH_PROMPTS,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"harness.batch_concurrency: must be >= 1, got {concurrency}")
        self.backend = backend
        self.params = params
        self.concurrency = concurrency
        self.max_calls = max_calls
        self.max_tokens = max_tokens
        self.t0 = t0
        self.depth = depth
        self.system_prompt = system_prompt
        self.max_batch_prompts = max_batch_prompts
        self.turn_index = 0  # set by the root loop before each cell
        self.subcalls: list[Subcall] = []
        self.budget_exceeded: str | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tokens_used = 0  # finished calls: prompt + completion
        self._tokens_reserved = 0  # in-flight calls: estimated prompt tokens

    @property
    def tokens_used(self) -> int:
        return self._tokens_used

    # ------------------------------------------------------------------ API

    async def query(self, prompt: str) -> str:
        return (await self.batch([prompt]))[0]

    async def batch(self, prompts: list[str]) -> list[str]:
        if not isinstance(prompts, (list, tuple)):
            raise TypeError(f"llm_batch: prompts must be a list of str, got {type(prompts).__name__}")
        if len(prompts) > self.max_batch_prompts:
            raise ValueError(
                f"llm_batch: {len(prompts)} prompts in one batch; the limit is {self.max_batch_prompts}"
            )
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._loop is not loop:
            # A semaphore belongs to one event loop; tests and tools may run several in turn.
            self._semaphore, self._loop = asyncio.Semaphore(self.concurrency), loop
        # Reserve in prompt order, before anything runs.
        plans: list[tuple[Subcall, int] | str] = [self._reserve(p) for p in prompts]
        coros = [self._run(plan) for plan in plans]
        return list(await asyncio.gather(*coros))

    # ------------------------------------------------------------------ internals

    def _reserve(self, prompt: object) -> tuple[Subcall, int] | str:
        if not isinstance(prompt, str):
            return f"{ERROR_PREFIX}prompt must be a str, got {type(prompt).__name__}"
        if len(self.subcalls) >= self.max_calls:
            self.budget_exceeded = self.budget_exceeded or "max_subcalls"
            return calls_exhausted(self.max_calls)
        estimate = count_tokens(prompt)
        spent = self._tokens_used + self._tokens_reserved
        if spent + estimate > self.max_tokens:
            self.budget_exceeded = self.budget_exceeded or "max_subcall_tokens"
            return (
                f"{ERROR_PREFIX}subagent token budget exhausted (max_subcall_tokens={self.max_tokens}): "
                f"{spent:,} tokens used or in flight, {max(self.max_tokens - spent, 0):,} left, this prompt "
                f"needs about {estimate:,}; send shorter prompts or fewer of them"
            )
        self._tokens_reserved += estimate
        call = Subcall(
            index=len(self.subcalls),
            turn_index=self.turn_index,
            depth=self.depth,
            model=self.backend.name,
            prompt=prompt,
            response=None,
        )
        self.subcalls.append(call)
        return call, estimate

    async def _run(self, plan: tuple[Subcall, int] | str) -> str:
        if isinstance(plan, str):
            return plan
        call, estimate = plan
        messages = [{"role": "user", "content": call.prompt}]
        if self.system_prompt:
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        assert self._semaphore is not None
        try:
            async with self._semaphore:
                call.issued_s = time.monotonic() - self.t0
                try:
                    comp = await self.backend.complete(messages, self.params)
                finally:
                    call.returned_s = time.monotonic() - self.t0
                    call.latency_s = call.returned_s - call.issued_s
        except ContextLimitError as exc:
            call.error = f"context limit: {exc}"
            return f"{ERROR_PREFIX}prompt refused: {exc}"
        except asyncio.CancelledError:
            call.error = "cancelled"
            raise
        except Exception as exc:  # noqa: BLE001 - reported to the root as an ERROR item
            call.error = f"{type(exc).__name__}: {exc}"
            return f"{ERROR_PREFIX}{type(exc).__name__}: {exc}"
        finally:
            self._tokens_reserved -= estimate
        call.response = comp.text
        call.prompt_tokens = comp.prompt_tokens
        call.completion_tokens = comp.completion_tokens
        if comp.model:
            call.model = comp.model
        self._tokens_used += comp.prompt_tokens + comp.completion_tokens
        if self._tokens_used > self.max_tokens:
            self.budget_exceeded = self.budget_exceeded or "max_subcall_tokens"
        return comp.text
