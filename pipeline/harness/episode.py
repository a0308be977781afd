"""What the RLM root loop and the tool-loop baseline share: the root's turn, statuses, clocks.

One ``EpisodeRecorder`` belongs to one trajectory. It calls the root model
on the conversation so far (extra message keys such as ``example`` stripped),
records each turn with the messages appended since the previous one, keeps
root usage, and closes the trace with a status from
``pipeline.harness.trace.STATUSES``. ``run_harness`` picks the harness by
``HarnessConfig.kind`` from ``HARNESSES`` (a registry, like the backends).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from pipeline.harness.prompts import strip_extra_keys
from pipeline.harness.trace import STATUSES, Trace, Turn
from pipeline.llm.base import Backend, Completion, ContextLimitError, GenerationParams


def now_iso() -> str:
    return datetime.now(UTC).replace(tzinfo=None).isoformat()


async def guarded(rec: Any, timeout_s: float, loop: Callable[[], Awaitable[None]]) -> None:
    """Run an episode loop under its wall-time limit. A timeout, a root context
    overflow or any crash ends the episode with a status on ``rec`` (an
    EpisodeRecorder) instead of an exception: the sampler goes on."""
    timeout = asyncio.timeout(timeout_s)
    try:
        async with timeout:
            await loop()
    except TimeoutError as exc:
        if timeout.expired():
            rec.finish("timeout", f"episode wall time over {timeout_s:g} s")
        else:
            rec.finish("error", f"TimeoutError: {exc}")
    except ContextLimitError as exc:
        rec.finish("error", f"root context limit: {exc}")
    except Exception as exc:  # noqa: BLE001 - a trajectory records its failure, the sampler goes on
        rec.finish("error", f"{type(exc).__name__}: {exc}"[:2000])


def cut(text: str, limit: int) -> str:
    """``text`` up to ``limit`` characters, with a visible marker for what was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters]"


class EpisodeRecorder:
    """The root's side of an episode: the conversation, its turns, and the trace."""

    def __init__(self, trace: Trace, root: Backend, params: GenerationParams, t0: float) -> None:
        self.trace = trace
        self.root = root
        self.params = params
        self.t0 = t0
        self.messages: list[dict[str, Any]] = []
        self._recorded = 0  # messages already attributed to a turn

    def now(self) -> float:
        return time.monotonic() - self.t0

    async def complete(self) -> tuple[Completion, float, list[dict[str, Any]]]:
        """Ask the root for the next turn: (completion, started_s, messages new since the last turn)."""
        started = self.now()
        new = [dict(m) for m in self.messages[self._recorded :]]
        comp = await self.root.complete(strip_extra_keys(self.messages), self.params)
        self.trace.add_usage(self.root.name, comp.prompt_tokens, comp.completion_tokens)
        return comp, started, new

    def record(
        self,
        comp: Completion,
        completion_text: str,
        started_s: float,
        new_messages: list[dict[str, Any]],
        *,
        code: str | None = None,
        output: str | None = None,
        error: str | None = None,
    ) -> Turn:
        """Append the assistant message and the turn (call after the turn's code or tool ran)."""
        self.messages.append({"role": "assistant", "content": completion_text})
        self._recorded = len(self.messages)
        turn = Turn(
            index=len(self.trace.turns),
            new_messages=new_messages,
            completion=completion_text,
            code=code,
            output=output,
            error=error,
            prompt_tokens=comp.prompt_tokens,
            completion_tokens=comp.completion_tokens,
            started_s=started_s,
            ended_s=self.now(),
        )
        self.trace.turns.append(turn)
        return turn

    def say(self, content: str) -> None:
        """A user message the root will see at its next turn."""
        self.messages.append({"role": "user", "content": content})

    def finish(self, status: str, reason: str, memo: str | None = None) -> None:
        if status not in STATUSES:
            raise ValueError(f"unknown trajectory status {status!r} (known: {', '.join(STATUSES)})")
        self.trace.status = status
        self.trace.end_reason = reason
        if memo is not None:
            self.trace.memo = memo


EpisodeFn = Callable[..., Awaitable[Trace]]


def _rlm(*args: Any, **kw: Any) -> Awaitable[Trace]:
    from pipeline.harness.root import run_episode

    return run_episode(*args, **kw)


def _toolloop(*args: Any, **kw: Any) -> Awaitable[Trace]:
    from pipeline.harness.toolloop import run_toolloop_episode

    return run_toolloop_episode(*args, **kw)


HARNESSES: dict[str, EpisodeFn] = {"rlm": _rlm, "toolloop": _toolloop}


def run_harness(room, room_dir, root, subagent, harness, sampling, **kw: Any) -> Awaitable[Trace]:
    """Run one episode with the harness named by ``harness.kind`` (same arguments as run_episode)."""
    if harness.kind not in HARNESSES:
        raise KeyError(
            f"harness.kind: unknown harness {harness.kind!r} (known: {', '.join(sorted(HARNESSES))})"
        )
    return HARNESSES[harness.kind](room, room_dir, root, subagent, harness, sampling, **kw)
