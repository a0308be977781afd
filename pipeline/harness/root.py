"""The RLM root loop: one trajectory of the root agent working a data room through a REPL.

Each turn the root model sees the conversation so far and writes a
```python block; the block runs in the episode's sandboxed REPL
(pipeline.harness.sandbox), and what the REPL printed (cut at
``harness.output_chars``), with a short traceback or limit message, is the
next user message. Subagent calls from the REPL (``llm_query`` /
``llm_batch``) go through one ``SubagentRunner`` per episode, which enforces
the trajectory's call and token budgets and records every call. A batch
started with ``llm_batch_async`` runs on the episode's event loop while the
cell, and the root's later turns, go on: the root can write its memo while
subagents read. What is still running when the episode ends is cancelled
(those calls are recorded with error ``cancelled``).

Endings (``Trace.status``): ``submitted`` (the code called ``submit(memo)``),
``turn_limit`` (after ``max_turns`` the root is asked once for its memo and
did not submit; its final completion is the memo), ``budget`` (the subagent
budget ran out; a memo submitted in that same cell is kept), ``timeout`` (``episode_timeout_s``), ``error`` (anything
else, with the reason). Model misbehaviour never raises out of
``run_episode``.

Depth 2 (``harness.max_depth >= 2``): ``rlm_query(prompt, paths)`` runs a
child episode over a sub-room of those documents, exported to its own
folder, with its own sandbox and budget. The call is recorded in the
parent's ``subcalls`` (model ``rlm:<root>``) and the child's trace in
``children``; the child's own subcalls carry ``depth = 2`` and
``parent_call`` = that call's index, and their ``turn_index`` is the
child's turn. All times of a child are on its parent's clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from pipeline.config import HarnessConfig, SamplingConfig
from pipeline.harness.codeblocks import close_open_block, code_blocks
from pipeline.harness.episode import CODE_STOP, EpisodeRecorder, guarded, now_iso
from pipeline.harness.output_cut import cut
from pipeline.harness.prompts import PromptError, PromptVariant, build_messages, load_variant, room_info
from pipeline.harness.subagents import ERROR_PREFIX, SubagentRunner, calls_exhausted, room_budgets
from pipeline.harness.trace import Subcall, Trace
from pipeline.llm.base import Backend, GenerationParams
from pipeline.rooms.model import Room

MAX_ASYNC_BATCHES = 1000  # llm_batch_async batches one episode may start (host memory, not reading budget)

# Tracebacks and limit messages shown to the root are kept short; the code is the root's own.
ERROR_CHARS = 1500
RLM_MODEL_PREFIX = "rlm:"


def format_cell(result: Any, output_chars: int) -> tuple[str, str | None]:
    """(message shown to the root, error text or None) for one sandbox CellResult."""
    parts: list[str] = []
    output = (result.output or "").rstrip("\n")
    if output:
        # The sandbox cuts too (its marker fits the slack); this keeps the bound whatever it did.
        parts.append(cut(output, output_chars, slack=64))
    errors: list[str] = []
    if result.error:
        errors.append(cut(str(result.error).strip(), ERROR_CHARS))
    # "output" only means the print-out was cut, which its marker already shows;
    # other limits (timeout, memory, sandbox) normally come with an error text.
    if result.limit and result.limit != "output" and not result.error:
        errors.append(f"[limit: {result.limit}]")
    if getattr(result, "reset", False) and "restarted" not in (result.error or ""):
        errors.append("[the REPL was restarted: variables from earlier cells are gone]")
    parts += errors
    if not parts:
        parts.append("[no output: only what you print() is shown]")
    return "\n".join(parts), ("\n".join(errors) or None)


def _submitted_memo(result: Any) -> str | None:
    """The memo of a cell that called submit(), else None."""
    sub = getattr(result, "submitted", None)
    if sub is None or sub is False:
        return None
    if isinstance(sub, str):
        return sub
    memo = getattr(result, "memo", None)
    return "" if memo is None else str(memo)


class _RlmEpisode:
    def __init__(
        self,
        room: Room,
        room_dir: Path,
        root: Backend,
        subagent: Backend,
        harness: HarnessConfig,
        sampling: SamplingConfig,
        *,
        trajectory_id: str,
        policy_id: str,
        seed: int,
        depth: int,
        t0: float,
        task: str | None = None,
    ) -> None:
        self.room = room
        self.room_dir = Path(room_dir)
        self.root = root
        self.subagent = subagent
        self.harness = harness
        self.sampling = sampling
        self.seed = seed
        self.depth = depth
        self.t0 = t0
        self.task = task  # a child's request from its parent; None for the top-level memo task
        self.trace = Trace(trajectory_id=trajectory_id, room=room.name, policy_id=policy_id, harness="rlm")
        params = GenerationParams(
            max_tokens=sampling.max_new_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            stop=list(CODE_STOP),
            seed=seed,
        )
        self.rec = EpisodeRecorder(self.trace, root, params, t0)
        max_calls, max_tokens = room_budgets(
            room.n_tokens,
            len(room.documents),
            harness.max_subcalls,
            harness.max_subcall_tokens,
            harness.budget_share,
        )
        self.trace.subagent_budget_tokens = max_tokens
        self.runner = SubagentRunner(
            subagent,
            GenerationParams(max_tokens=harness.subagent_max_new_tokens, temperature=0.0, seed=seed),
            concurrency=harness.batch_concurrency,
            max_calls=max_calls,
            max_tokens=max_tokens,
            t0=t0,
            depth=depth,
        )
        self.sandbox: Any = None
        self.info: dict[str, Any] = {}
        self.pending: list[asyncio.Future] = []  # llm_batch_async batches, by handle

    # ------------------------------------------------------------------ running

    async def run(self) -> Trace:
        started = time.monotonic()
        self.trace.started_at = now_iso()
        try:
            await guarded(self.rec, self.harness.episode_timeout_s, self._loop)
        finally:
            # batches started with llm_batch_async and never waited for end with the episode
            for task in self.pending:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*self.pending, return_exceptions=True)
            self.trace.subcalls = self.runner.subcalls
            for call in self.trace.subcalls:
                if not call.model.startswith(RLM_MODEL_PREFIX) and call.response is not None:
                    self.trace.add_usage(call.model, call.prompt_tokens, call.completion_tokens)
            for child in self.trace.children:  # usage covers the whole tree
                for model, u in child.usage.items():
                    mine = self.trace.usage.setdefault(
                        model, {"prompt_tokens": 0, "completion_tokens": 0, "calls": 0}
                    )
                    for k, v in u.items():
                        mine[k] = mine.get(k, 0) + v
            self.trace.wall_s = time.monotonic() - started
        return self.trace

    async def _loop(self) -> None:
        from pipeline.harness.sandbox import Sandbox, SandboxLimits

        variant = load_variant(self.harness.prompt)
        if variant.harness != "rlm":
            raise PromptError(
                f"harness.prompt: variant {variant.name!r} is for the {variant.harness} harness, not rlm"
            )
        self.info = room_info(
            self.room,
            subagent_context_tokens=self.subagent.context_tokens,
            output_chars=self.harness.output_chars,
            max_turns=self.harness.max_turns,
            depth=self.depth,
            max_depth=self.harness.max_depth,
            variant=variant,
            subagent_budget_tokens=self.runner.max_tokens,
        )
        task = None
        if self.task is not None:
            task = variant.section("child_task", {**self.info, "prompt": self.task})
        self.rec.messages = build_messages(variant, self.info, task)
        limits = SandboxLimits(
            cell_timeout_s=self.harness.cell_timeout_s,
            memory_mb=self.harness.memory_mb,
            output_chars=self.harness.output_chars,
            level=self.harness.sandbox_level,
            min_level=self.harness.min_sandbox_level,
        )
        async with Sandbox(self.room_dir, limits, on_llm=self._on_llm) as sandbox:
            self.sandbox = sandbox
            self.trace.sandbox_level = sandbox.level
            for _ in range(self.harness.max_turns):
                if await self._turn(variant, final=False):
                    return
            # Out of turns: ask once for the memo.
            self.rec.say(variant.section("final", self.info))
            await self._turn(variant, final=True)

    async def _turn(self, variant: Any, *, final: bool) -> bool:
        """One root turn; True when the episode ended."""
        comp, started, new = await self.rec.complete()
        text = close_open_block(comp.text)
        blocks = code_blocks(text)
        if not blocks:
            self.rec.record(comp, text, started, new)
            if final:
                self.rec.finish(
                    "turn_limit",
                    "turn limit: no submit(); the final completion is the memo",
                    comp.text.strip(),
                )
                return True
            self.rec.say(variant.section("no_code", self.info))
            return False

        index = len(self.trace.turns)
        self.runner.turn_index = index
        ran: list[str] = []
        shown: list[str] = []
        errors: list[str] = []
        memo: str | None = None
        for code in blocks:
            result = await self.sandbox.run_cell(code)
            ran.append(code)
            message, error = format_cell(result, self.harness.output_chars)
            shown.append(message)
            if error:
                errors.append(error)
            memo = _submitted_memo(result)
            # Later blocks usually build on earlier ones: stop at the first failure.
            if memo is not None or error or self.runner.budget_exceeded:
                break
        output = "\n".join(shown)
        self.rec.record(
            comp, text, started, new, code="\n\n".join(ran), output=output, error="\n".join(errors) or None
        )
        if memo is not None:
            self.trace.submit_turn_started_s = started
        # An exhausted budget ends the episode even when the same cell submitted:
        # that memo was written from refused (ERROR) subagent answers. It is kept.
        if self.runner.budget_exceeded:
            self.rec.finish("budget", f"subagent budget exhausted: {self.runner.budget_exceeded}", memo)
            return True
        if memo is not None:
            reason = "submit() when asked at the turn limit" if final else "submit()"
            self.rec.finish("submitted", reason, memo)
            return True
        if final:
            self.rec.finish(
                "turn_limit", "turn limit: no submit(); the final completion is the memo", comp.text.strip()
            )
            return True
        self.rec.say(output)
        return False

    # ------------------------------------------------------------------ REPL callbacks

    async def _on_llm(self, kind: str, payload: dict[str, Any]) -> Any:
        if kind == "batch":
            return await self.runner.batch(payload["prompts"])
        if kind == "start":  # llm_batch_async: the batch runs on this loop while the root's turns go on
            if len(self.pending) >= MAX_ASYNC_BATCHES:
                # each start holds a task here, and a cell can start them as fast as it can loop
                raise ValueError(
                    f"llm_batch_async: {MAX_ASYNC_BATCHES} batches started in this episode, the limit; "
                    "send more prompts per batch"
                )
            self.pending.append(asyncio.ensure_future(self.runner.batch(payload["prompts"])))
            return len(self.pending) - 1
        if kind == "poll":
            return all(self._started(h).done() for h in payload["handles"])
        if kind == "wait":
            return await asyncio.shield(self._started(payload["handle"]))
        if kind == "query":
            return await self.runner.query(payload["prompt"])
        if kind == "rlm":
            return await self._rlm_query(payload.get("prompt"), payload.get("paths"))
        raise ValueError(f"unknown REPL call kind {kind!r}")

    def _started(self, handle: int) -> asyncio.Future:
        if not 0 <= handle < len(self.pending):
            raise ValueError(f"no llm_batch_async batch has handle {handle}")
        return self.pending[handle]

    async def _rlm_query(self, prompt: Any, paths: Any) -> str:
        if self.depth + 1 > self.harness.max_depth:
            return (
                f"{ERROR_PREFIX}rlm_query is not available here (this REPL is at depth {self.depth}, "
                f"harness.max_depth={self.harness.max_depth})"
            )
        if not isinstance(prompt, str) or not prompt.strip():
            return f"{ERROR_PREFIX}rlm_query: prompt must be a non-empty str"
        if isinstance(paths, str):
            paths = [paths]
        if not isinstance(paths, list | tuple) or not paths or not all(isinstance(p, str) for p in paths):
            return f"{ERROR_PREFIX}rlm_query: paths must be a non-empty list of document paths"
        by_path = {d.path: d for d in self.room.documents}
        unknown = [p for p in paths if p not in by_path]
        if unknown:
            return f"{ERROR_PREFIX}rlm_query: no document {unknown[0]!r} in this room"
        if len(self.runner.subcalls) >= self.runner.max_calls:
            self.runner.budget_exceeded = self.runner.budget_exceeded or "max_subcalls"
            return calls_exhausted(self.runner.max_calls)

        call = Subcall(
            index=len(self.runner.subcalls),
            turn_index=self.runner.turn_index,
            depth=self.depth,
            model=f"{RLM_MODEL_PREFIX}{self.root.name}",
            prompt=prompt,
            response=None,
            issued_s=time.monotonic() - self.t0,
        )
        self.runner.subcalls.append(call)
        docs = [by_path[p] for p in dict.fromkeys(paths)]
        sub_room = Room(
            name=f"{self.room.name}#rlm{call.index}",
            target=self.room.target,
            deal=self.room.deal,
            documents=docs,
            source=self.room.source,
            split=self.room.split,
        )
        tmp = Path(tempfile.mkdtemp(prefix="rlm-child-"))
        try:
            from pipeline.harness.room_export import export_room

            child_dir = export_room(sub_room, tmp / "room")
            child = _RlmEpisode(
                sub_room,
                child_dir,
                self.root,
                self.subagent,
                self.harness,
                self.sampling,
                trajectory_id=f"{self.trace.trajectory_id}/rlm{call.index}",
                policy_id=self.trace.policy_id,
                seed=self.seed,
                depth=self.depth + 1,
                t0=self.t0,
                task=prompt,
            )
            ctrace = await child.run()
        except Exception as exc:  # noqa: BLE001 - the REPL gets an ERROR string, the episode goes on
            call.error = f"{type(exc).__name__}: {exc}"
            call.returned_s = time.monotonic() - self.t0
            call.latency_s = call.returned_s - call.issued_s
            return f"{ERROR_PREFIX}rlm_query failed: {call.error}"
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        for sc in ctrace.subcalls:
            if sc.parent_call is None:
                sc.parent_call = call.index
        self.trace.children.append(ctrace)
        if ctrace.memo:
            answer = ctrace.memo
        else:
            answer = (
                f"{ERROR_PREFIX}the sub-review ended ({ctrace.status}: {ctrace.end_reason}) without an answer"
            )
            call.error = f"child {ctrace.status}: {ctrace.end_reason}"
        call.response = answer
        call.returned_s = time.monotonic() - self.t0
        call.latency_s = call.returned_s - call.issued_s
        return answer


async def run_episode(
    room: Room,
    room_dir: Path,
    root: Backend,
    subagent: Backend,
    harness: HarnessConfig,
    sampling: SamplingConfig,
    *,
    trajectory_id: str,
    policy_id: str,
    seed: int = 0,
    depth: int = 1,
) -> Trace:
    """One RLM trajectory of ``root`` on ``room`` (exported at ``room_dir``); never raises for model behaviour."""
    episode = _RlmEpisode(
        room,
        room_dir,
        root,
        subagent,
        harness,
        sampling,
        trajectory_id=trajectory_id,
        policy_id=policy_id,
        seed=seed,
        depth=depth,
        t0=time.monotonic(),
    )
    return await episode.run()


# --------------------------------------------------------------------------- the worked example


async def replay_example(variant_name: str, subagent: Backend | None = None) -> list[str]:
    """Run a variant's worked-example programs on their example rooms; the REPL messages the harness would show.

    The example's user turns after each assistant turn must equal these
    (tests/harness/test_prompts.py checks it), so the example never shows
    output its program cannot produce. The subagent defaults to the extractive
    reader.
    """
    from pipeline.config import BackendConfig
    from pipeline.llm.extractive import ExtractiveBackend

    variant = load_variant(variant_name)
    if not variant.example_sources:
        raise PromptError(f"{variant.source}: variant {variant_name!r} has no worked example")
    subagent = subagent or ExtractiveBackend(BackendConfig(kind="extractive"))
    shown: list[str] = []
    for source in variant.example_sources:
        shown += await _replay_episode(variant, Path(source), subagent)
    return shown


async def _replay_episode(variant: PromptVariant, source: Path, subagent: Backend) -> list[str]:
    """One worked episode's programs run in a sandbox over its room: the REPL message after each turn."""
    from pipeline.harness.prompts import load_example
    from pipeline.harness.room_export import export_room
    from pipeline.harness.sandbox import Sandbox, SandboxLimits

    room, messages = load_example(source, variant)
    harness = HarnessConfig()
    max_calls, max_tokens = room_budgets(
        room.n_tokens, len(room.documents), harness.max_subcalls, harness.max_subcall_tokens
    )
    runner = SubagentRunner(
        subagent,
        GenerationParams(max_tokens=harness.subagent_max_new_tokens, temperature=0.0),
        concurrency=4,
        max_calls=max_calls,
        max_tokens=max_tokens,
        t0=time.monotonic(),
    )

    async def on_llm(kind: str, payload: dict[str, Any]) -> Any:
        return await runner.batch(payload["prompts"])

    shown: list[str] = []
    with tempfile.TemporaryDirectory(prefix="rlm-example-") as tmp:
        room_dir = export_room(room, Path(tmp) / "room")
        limits = SandboxLimits(harness.cell_timeout_s, harness.memory_mb, harness.output_chars)
        async with Sandbox(room_dir, limits, on_llm=on_llm) as sandbox:
            for m in messages:
                if m["role"] != "assistant":
                    continue
                parts = []
                for code in code_blocks(m["content"]):
                    result = await sandbox.run_cell(code)
                    parts.append(format_cell(result, harness.output_chars)[0])
                    memo = _submitted_memo(result)
                    if memo is not None:
                        parts.append(variant.section("submitted", {"memo_chars": len(memo)}))
                shown.append("\n".join(parts))
    return shown


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description="Print the REPL output of a prompt variant's worked example.")
    ap.add_argument("--replay-example", metavar="VARIANT", required=True)
    args = ap.parse_args(argv)
    for text in asyncio.run(replay_example(args.replay_example)):
        print(text)
        print("-----")


if __name__ == "__main__":
    main()
