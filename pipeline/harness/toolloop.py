"""The tool-loop baseline: the root reads the room through four tools, one call per turn.

Same rooms, backends, statuses and ``Trace`` format as the RLM harness
(``Trace.harness == "toolloop"``), so the pipeline can set the two side by
side: a tool loop only ever sees what it reads into its own context, so it
covers a tiny share of a large room.

Protocol (the prompt variant ``toolloop`` describes it to the model): a turn
holds one ```tool block (```json also works) with ``{"name": ..., "args":
{...}}``; OpenAI-style function calls are accepted too (``{"name": ...,
"arguments": "<json>"}``, ``{"function": {...}}``, ``{"tool_calls": [...]}``)
and so is a bare JSON object in the text. Tools: ``list_folder(folder)``,
``search(pattern)``, ``read(path, offset, length)``, ``submit(memo)``. The
tool result (cut at ``harness.output_chars``) is the next user message; a
bad call gets a short error message and the loop goes on. The room is read
through ``pipeline.harness.room_view.RoomView`` over the exported room
folder, so search and folder semantics match the REPL's ``room``.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from pipeline.config import HarnessConfig, SamplingConfig
from pipeline.harness.codeblocks import close_open_block, fenced_blocks
from pipeline.harness.episode import CODE_STOP, EpisodeRecorder, guarded, now_iso
from pipeline.harness.output_cut import cut
from pipeline.harness.prompts import PromptError, build_messages, load_variant, room_info
from pipeline.harness.room_view import RoomView
from pipeline.harness.trace import Trace
from pipeline.llm.base import Backend, GenerationParams
from pipeline.rooms.model import Room

TOOLS = ("list_folder", "search", "read", "submit")
TOOL_LANGUAGES = ("tool", "json", "tool_call", "")
SEARCH_MAX_HITS = 50


class ToolCallError(ValueError):
    """A completion whose tool call cannot be understood (the message is shown to the model)."""


def _normalise(obj: Any) -> tuple[str, dict[str, Any]]:
    """(name, args) from the accepted call shapes."""
    if isinstance(obj, list) and obj:
        obj = obj[0]
    if not isinstance(obj, dict):
        raise ToolCallError('a tool call is a JSON object {"name": ..., "args": {...}}')
    if "tool_calls" in obj and isinstance(obj["tool_calls"], list) and obj["tool_calls"]:
        obj = obj["tool_calls"][0]
    if isinstance(obj.get("function"), dict):
        obj = obj["function"]
    name = obj.get("name") or obj.get("tool")
    if not isinstance(name, str):
        raise ToolCallError('the tool call has no "name"')
    args = obj.get("args", obj.get("arguments", obj.get("parameters", {})))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolCallError(f'"arguments" is not valid JSON: {exc}') from exc
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ToolCallError('"args" must be a JSON object')
    return name, args


def _json_objects(text: str) -> list[Any]:
    """Every top-level JSON object that parses, scanning from each '{'."""
    decoder = json.JSONDecoder()
    out, pos = [], 0
    while (start := text.find("{", pos)) >= 0:
        try:
            obj, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            pos = start + 1
            continue
        out.append(obj)
        pos = end
    return out


def parse_tool_call(text: str) -> tuple[str, dict[str, Any]] | None:
    """The first tool call in a completion, None when there is none; ToolCallError when malformed."""
    candidates: list[str] = [b.body for b in fenced_blocks(text) if b.language in TOOL_LANGUAGES]
    bodies = candidates or [text]
    first_error: ToolCallError | None = None
    for body in bodies:
        objs = _json_objects(body)
        if not objs and candidates:
            first_error = first_error or ToolCallError("the ```tool block does not hold valid JSON")
        for obj in objs:
            try:
                return _normalise(obj)
            except ToolCallError as exc:
                first_error = first_error or exc
    if first_error is not None:
        raise first_error
    return None


class RoomTools:
    """The four tools over an exported room; each returns the text shown to the model."""

    def __init__(self, view: RoomView, output_chars: int) -> None:
        self.view = view
        self.output_chars = output_chars

    def call(self, name: str, args: dict[str, Any]) -> str:
        if name not in TOOLS or name == "submit":
            raise ToolCallError(f"unknown tool {name!r} (tools: {', '.join(TOOLS)})")
        fn = getattr(self, name)
        try:
            return fn(**args)
        except TypeError as exc:
            raise ToolCallError(f"{name}: bad arguments {sorted(args)} ({exc})") from exc

    def list_folder(self, folder: str = "") -> str:
        if not isinstance(folder, str):
            raise ToolCallError("list_folder: folder must be a string")
        f = folder.strip("/")
        docs = [d for d in self.view.documents if d.folder == f]
        subs: dict[str, int] = {}
        for d in self.view.docs(folder=f):
            if d.folder != f:
                rest = d.folder[len(f) + 1 :] if f else d.folder
                sub = (f + "/" if f else "") + rest.split("/", 1)[0]
                subs[sub] = subs.get(sub, 0) + 1
        if not docs and not subs:
            raise ToolCallError(
                f"list_folder: no folder {folder!r} (folders: {', '.join(self.view.folders[:20])})"
            )
        lines = [f"{f or '(top)'}/: {len(subs)} subfolders, {len(docs)} documents"]
        lines += [f"[folder] {s}/ ({n} documents)" for s, n in sorted(subs.items())]
        lines += [f"{d.path} ({d.title}, {d.n_tokens} tokens)" for d in docs]
        return "\n".join(lines)

    def search(self, pattern: str) -> str:
        if not isinstance(pattern, str) or not pattern:
            raise ToolCallError("search: pattern must be a non-empty string")
        try:
            hits = self.view.search(pattern, flags=re.IGNORECASE, max_hits=SEARCH_MAX_HITS)
        except re.error as exc:
            raise ToolCallError(f"search: invalid regular expression: {exc}") from exc
        if not hits:
            return f"no matches for {pattern!r}"
        return "\n".join(
            [f"{len(hits)} hits for {pattern!r}"] + [f"{h.path} @{h.offset}: {h.snippet}" for h in hits]
        )

    def read(self, path: str, offset: int = 0, length: int | None = None) -> str:
        if not isinstance(path, str):
            raise ToolCallError("read: path must be a string")
        try:
            text = self.view.read(path)
        except KeyError as exc:
            raise ToolCallError(f"read: {exc.args[0]}") from exc
        length = self.output_chars if length is None else length
        if not isinstance(offset, int) or not isinstance(length, int) or offset < 0 or length < 1:
            raise ToolCallError("read: offset must be an integer >= 0 and length an integer >= 1")
        # The header says exactly which characters were shown, so the piece is
        # sized to fit the output limit with it instead of being cut by it.
        header_room = len(f"{path} [characters {offset}-{offset + length} of {len(text)}]\n") + 8
        length = max(1, min(length, self.output_chars - header_room))
        piece = text[offset : offset + length]
        return f"{path} [characters {offset}-{offset + len(piece)} of {len(text)}]\n{piece}"


class _ToolLoopEpisode:
    def __init__(self, room, room_dir, root, harness, sampling, *, trajectory_id, policy_id, seed, t0):
        self.room = room
        self.room_dir = Path(room_dir)
        self.harness = harness
        self.trace = Trace(
            trajectory_id=trajectory_id, room=room.name, policy_id=policy_id, harness="toolloop"
        )
        params = GenerationParams(
            max_tokens=sampling.max_new_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            stop=list(CODE_STOP),
            seed=seed,
        )
        self.rec = EpisodeRecorder(self.trace, root, params, t0)
        self.tools: RoomTools | None = None
        self.info: dict[str, Any] = {}

    async def run(self) -> Trace:
        started = time.monotonic()
        self.trace.started_at = now_iso()
        try:
            await guarded(self.rec, self.harness.episode_timeout_s, self._loop)
        finally:
            self.trace.wall_s = time.monotonic() - started
        return self.trace

    async def _loop(self) -> None:
        variant = load_variant(self.harness.prompt)
        if variant.harness != "toolloop":
            raise PromptError(
                f"harness.prompt: variant {variant.name!r} is for the {variant.harness} harness; "
                "the tool loop needs a toolloop variant (e.g. harness.prompt=toolloop)"
            )
        self.tools = RoomTools(RoomView(self.room_dir), self.harness.output_chars)
        self.info = room_info(
            self.room,
            output_chars=self.harness.output_chars,
            max_turns=self.harness.max_turns,
            variant=variant,
        )
        self.rec.messages = build_messages(variant, self.info)
        for _ in range(self.harness.max_turns):
            if await self._turn(variant, final=False):
                return
        self.rec.say(variant.section("final", self.info))
        await self._turn(variant, final=True)

    async def _turn(self, variant: Any, *, final: bool) -> bool:
        comp, started, new = await self.rec.complete()
        text = close_open_block(comp.text)
        try:
            call = parse_tool_call(text)
        except ToolCallError as exc:
            call, message, error = None, f"ERROR: {exc}", str(exc)
        else:
            message, error = variant.section("no_tool", self.info), None
        if call is None:
            self.rec.record(comp, text, started, new, output=message, error=error)
            if final:
                self.rec.finish(
                    "turn_limit", "turn limit: no submit; the final completion is the memo", comp.text.strip()
                )
                return True
            self.rec.say(message)
            return False
        name, args = call
        code = json.dumps({"name": name, "args": args}, ensure_ascii=False)
        if name == "submit":
            memo = args.get("memo")
            if isinstance(memo, str) and memo.strip():
                self.rec.record(comp, text, started, new, code=code)
                self.rec.finish(
                    "submitted", "submit when asked at the turn limit" if final else "submit", memo
                )
                self.trace.submit_turn_started_s = started
                return True
            output, error = 'ERROR: submit needs a non-empty "memo" string', "submit without a memo"
        else:
            try:
                output, error = cut(self.tools.call(name, args), self.harness.output_chars), None
            except ToolCallError as exc:
                output, error = f"ERROR: {exc}", str(exc)
        self.rec.record(comp, text, started, new, code=code, output=output, error=error)
        if final:
            self.rec.finish(
                "turn_limit", "turn limit: no submit; the final completion is the memo", comp.text.strip()
            )
            return True
        self.rec.say(output)
        return False


async def run_toolloop_episode(
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
    """One tool-loop trajectory (``subagent`` and ``depth`` are unused: the tool loop never delegates)."""
    del subagent, depth
    episode = _ToolLoopEpisode(
        room,
        room_dir,
        root,
        harness,
        sampling,
        trajectory_id=trajectory_id,
        policy_id=policy_id,
        seed=seed,
        t0=time.monotonic(),
    )
    return await episode.run()
