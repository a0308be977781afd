"""What the RLM root loop and the tool-loop baseline share: the root's turn, statuses, clocks.

One ``EpisodeRecorder`` belongs to one trajectory. It calls the root model
on the conversation so far (extra message keys such as ``example`` stripped),
records each turn with the messages appended since the previous one, keeps
root usage, and closes the trace with a status from
``pipeline.harness.trace.STATUSES``.

``run_harness`` is the one entry point for running an episode: it picks the
harness by ``HarnessConfig.kind`` from ``pipeline.harness.registry.HARNESSES``
(names -> ``"module:attr"``, imported on use, like the backends), so this
module, which the harnesses import, imports none of them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.config import HarnessConfig
from pipeline.harness.prompts import strip_extra_keys
from pipeline.harness.registry import episode_function
from pipeline.harness.trace import STATUSES, Trace, Turn
from pipeline.llm.base import Backend, Completion, ContextLimitError, GenerationParams
from pipeline.llm.openai_backend import ServerUnavailable
from pipeline.rooms.model import Room

# Both harnesses stop the root at the end of its fenced block (code or tool
# call), so it never writes the REPL's or the tool's answer itself.
CODE_STOP = ["\n```\n"]


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
    except ServerUnavailable:
        raise  # the deployment is down: the sampler stops, nothing is recorded for this trajectory
    except Exception as exc:  # noqa: BLE001 - a trajectory records its failure, the sampler goes on
        rec.finish("error", f"{type(exc).__name__}: {exc}"[:2000])


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
            reasoning=comp.reasoning or None,
            token_ids=comp.token_ids,
            token_logprobs=comp.logprobs,
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


def run_harness(
    room: Room,
    room_dir: Path,
    root: Backend,
    subagent: Backend,
    harness: HarnessConfig,
    *args: Any,
    **kw: Any,
) -> Awaitable[Trace]:
    """One episode of the harness named by ``harness.kind`` (an unknown kind is a ConfigError).

    The arguments are the harnesses' own (see ``pipeline.harness.root.run_episode``):
    sampling, then keyword-only trajectory_id, policy_id and seed.
    """
    return episode_function(harness.kind)(room, room_dir, root, subagent, harness, *args, **kw)
