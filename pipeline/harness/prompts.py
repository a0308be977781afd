"""Prompt variants of the root agent, one file each under pipeline/harness/prompts/.

A variant file is markdown with a YAML front matter and named sections::

    ---
    description: what this variant is for
    harness: rlm            # rlm | toolloop
    extends: base           # optional: inherit every section not given here
    example: [worked_example_heron.episode.yaml]  # optional worked episodes (a file or a list)
    ---
    <!-- section: system -->
    ... {{ placeholder }} ...
    <!-- section: task -->
    ...

Sections are templates with ``{{name}}`` placeholders filled from
``room_info()``; an unknown placeholder is an error naming the file and
section, and a line holding only a placeholder that renders empty is dropped
(so optional snippets such as the depth-2 ``rlm_query`` line leave no gap).
``system`` and ``task`` are required; the harnesses also read ``final`` (the
one request for a memo at the turn limit), ``no_code`` / ``no_tool`` (the
correction after a completion without code), ``child_task`` and ``depth2``.

The worked example is one or more complete episodes, each on a small
fictional room, placed before the real task as prior user/assistant messages
(two that read different parts of their rooms show that which part to read is
a choice: a small root copies one example's choice literally). Every one of
those messages carries ``"example": True`` so the dataset stage can mask or strip
it (context distillation); chat templates ignore the extra key, and the
harnesses strip it before a request.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pipeline.harness.registry import HARNESSES
from pipeline.ids import content_hash
from pipeline.rooms.model import Document, Room

PROMPTS_DIR = Path(__file__).parent / "prompts"
REQUIRED_SECTIONS = ("system", "task")
# Folders listed one by one in the system prompt; the rest are counted.
MAX_LISTED_FOLDERS = 40

_SECTION = re.compile(r"^<!--\s*section:\s*([a-z0-9_]+)\s*-->[ \t]*$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"\{\{\s*([a-z0-9_]+)\s*\}\}")


class PromptError(ValueError):
    """A variant file that cannot be used as given (the message names file and field)."""


@dataclass
class PromptVariant:
    name: str
    system: str  # template
    task: str  # template
    example: list[dict[str, Any]] = field(default_factory=list)  # rendered, each marked "example": True
    sections: dict[str, str] = field(default_factory=dict)  # every section, templates
    harness: str = "rlm"
    description: str = ""
    source: str = ""  # the variant file
    example_sources: list[str] = field(default_factory=list)  # the worked episodes' files, in order

    def section(self, name: str, values: dict[str, Any] | None = None) -> str:
        if name not in self.sections:
            raise PromptError(f"{self.source}: prompt variant {self.name!r} has no section {name!r}")
        return render(self.sections[name], values or {}, where=f"{self.source} [{name}]")


def variant_names() -> list[str]:
    return sorted(p.stem for p in PROMPTS_DIR.glob("*.md"))


def render(template: str, values: dict[str, Any], where: str = "template") -> str:
    """Fill ``{{name}}`` placeholders; unknown names are an error naming ``where``."""
    missing = sorted({m.group(1) for m in _PLACEHOLDER.finditer(template)} - set(values))
    if missing:
        raise PromptError(f"{where}: unknown placeholder(s) {', '.join(missing)}")
    lines = []
    for line in template.split("\n"):
        only_placeholder = _PLACEHOLDER.fullmatch(line.strip()) is not None
        filled = _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), line)
        if only_placeholder and not filled.strip():
            continue
        lines.append(filled)
    return "\n".join(lines)


def _parse_file(path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    text = path.read_text()
    if not text.startswith("---\n"):
        raise PromptError(f"{path}: a prompt variant starts with a '---' YAML front matter")
    end = text.find("\n---\n", 4)
    if end < 0:
        raise PromptError(f"{path}: front matter is not closed by a '---' line")
    try:
        meta = yaml.safe_load(text[4:end]) or {}
    except yaml.YAMLError as exc:
        raise PromptError(f"{path}: front matter: invalid YAML: {exc}") from exc
    if not isinstance(meta, dict):
        raise PromptError(f"{path}: front matter must be a mapping")
    unknown = set(meta) - {"description", "harness", "extends", "example"}
    if unknown:
        raise PromptError(f"{path}: unknown front matter key(s) {', '.join(sorted(unknown))}")
    body = text[end + 5 :]
    sections: dict[str, str] = {}
    marks = list(_SECTION.finditer(body))
    if body[: marks[0].start() if marks else len(body)].strip():
        raise PromptError(f"{path}: text before the first '<!-- section: name -->' marker")
    for i, m in enumerate(marks):
        name = m.group(1)
        if name in sections:
            raise PromptError(f"{path}: section {name!r} appears twice")
        stop = marks[i + 1].start() if i + 1 < len(marks) else len(body)
        sections[name] = body[m.end() + 1 : stop].strip("\n")
    return meta, sections


def _load_room(data: Any, where: str) -> Room:
    if not isinstance(data, dict):
        raise PromptError(f"{where}: 'room' must be a mapping")
    for key in ("name", "target", "deal", "documents"):
        if key not in data:
            raise PromptError(f"{where}: room: missing field {key!r}")
    docs = []
    for i, d in enumerate(data["documents"]):
        try:
            docs.append(Document(path=d["path"], category=d["category"], title=d["title"], text=d["text"]))
        except (KeyError, TypeError) as exc:
            raise PromptError(
                f"{where}: room.documents[{i}]: needs path, category, title, text ({exc})"
            ) from exc
    return Room(name=data["name"], target=data["target"], deal=data["deal"], documents=docs, source="example")


def load_example(path: Path, variant: PromptVariant) -> tuple[Room, list[dict[str, Any]]]:
    """The worked episode file: its room and its messages (task, then assistant/user turns)."""
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError as exc:
        raise PromptError(f"{variant.source}: example file {path.name} not found") from exc
    except yaml.YAMLError as exc:
        raise PromptError(f"{path}: invalid YAML: {exc}") from exc
    if not isinstance(data, dict) or "room" not in data or "turns" not in data:
        raise PromptError(f"{path}: an example episode is a mapping with 'room' and 'turns'")
    room = _load_room(data["room"], str(path))
    info = room_info(room, **data.get("settings", {}))
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": render(variant.task, info, where=f"{variant.source} [task]"),
            "example": True,
        }
    ]
    for i, turn in enumerate(data["turns"]):
        if not isinstance(turn, dict) or set(turn) != {"assistant", "user"}:
            raise PromptError(f"{path}: turns[{i}]: needs exactly 'assistant' and 'user'")
        messages.append({"role": "assistant", "content": turn["assistant"].rstrip("\n"), "example": True})
        messages.append({"role": "user", "content": turn["user"].rstrip("\n"), "example": True})
    return room, messages


def _resolve(name: str, seen: tuple[str, ...] = ()) -> tuple[dict[str, Any], dict[str, str], Path]:
    path = PROMPTS_DIR / f"{name}.md"
    if not path.exists():
        raise PromptError(
            f"harness.prompt: unknown prompt variant {name!r} (known: {', '.join(variant_names())})"
        )
    if name in seen:
        raise PromptError(f"{path}: 'extends' loops back to {name!r}")
    meta, sections = _parse_file(path)
    if "extends" in meta:
        parent_meta, parent_sections, _ = _resolve(str(meta["extends"]), seen + (name,))
        sections = {**parent_sections, **sections}
        # The worked example is never inherited: a variant names its own or has none.
        meta = {**{k: v for k, v in parent_meta.items() if k != "example"}, **meta}
    return meta, sections, path


def load_variant(name: str) -> PromptVariant:
    meta, sections, path = _resolve(name)
    for s in REQUIRED_SECTIONS:
        if s not in sections:
            raise PromptError(f"{path}: missing required section {s!r}")
    harness = meta.get("harness", "rlm")
    if harness not in HARNESSES:
        raise PromptError(f"{path}: harness: expected one of {', '.join(HARNESSES)}, got {harness!r}")
    variant = PromptVariant(
        name=name,
        system=sections["system"],
        task=sections["task"],
        sections=sections,
        harness=harness,
        description=str(meta.get("description", "")),
        source=str(path),
    )
    files = meta.get("example") or []
    for file in files if isinstance(files, list) else [files]:
        variant.example_sources.append(str(PROMPTS_DIR / str(file)))
        variant.example += load_example(Path(variant.example_sources[-1]), variant)[1]
    return variant


def variant_hash(name: str) -> str:
    """A short hash of what a variant puts before the model: its sections, harness and worked example.

    Part of a policy's id (pipeline.policies): editing a variant's text makes a new policy. The
    description is left out: it is read by people, not by the model.
    """
    variant = load_variant(name)
    return content_hash(
        {"sections": variant.sections, "harness": variant.harness, "example": variant.example}, length=12
    )


def _fmt_value(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int | float):
        return f"{v:,.0f}" if abs(v) >= 10_000 else f"{v:g}"
    return str(v)


# The facts worth a line of the prompt; other keys of room.target / room.deal
# stay in the REPL for the root to look up.
TARGET_KEYS = ("industry", "jurisdiction", "hq")
DEAL_KEYS = ("price", "buyer", "signing_target")


def _describe(d: dict[str, Any], lead: str, keys: tuple[str, ...]) -> str:
    head = d.get(lead)
    shown = [k for k in keys if k in d] or [
        k for k, v in d.items() if k != lead and isinstance(v, str | int | float)
    ]
    parts = []
    for k in shown:
        value = _fmt_value(d[k])
        if k == "price" and d.get("currency"):
            value = f"{d['currency']} {value}"
        parts.append(f"{k.replace('_', ' ')}: {value}")
    rest = ", ".join(parts)
    if head is None:
        return rest or "(not given)"
    return f"{head} ({rest})" if rest else str(head)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def room_info(
    room: Room,
    *,
    subagent_context_tokens: int = 8192,
    output_chars: int = 4000,
    max_turns: int = 4,
    depth: int = 1,
    max_depth: int = 1,
    variant: PromptVariant | None = None,
    subagent_budget_tokens: int | None = None,
) -> dict[str, Any]:
    """Placeholder values describing the room and the harness limits.

    ``depth2`` holds the ``rlm_query`` line of ``variant`` when this episode
    may still spawn children (depth < max_depth), else "".
    """
    # Top-level folders with their document, subfolder and token counts: compact
    # for a 5,000-document room, and enough to plan the split of the work.
    top: dict[str, list[Any]] = {}
    for d in room.documents:
        head = d.folder.split("/", 1)[0] if d.folder else "."
        c = top.setdefault(head, [0, 0, set(), Counter()])
        c[0] += 1
        c[1] += d.n_tokens
        if d.folder != head and d.folder:
            c[2].add(d.folder)
        c[3][d.category] += 1
    names = sorted(top)
    lines = []
    for f in names[:MAX_LISTED_FOLDERS]:
        n, t, subs, cats = top[f]
        sub = f" in {_plural(len(subs), 'subfolder')}" if subs else ""
        # the folder's category, so room.docs(category=...) can be written from this table
        cat = f" (category {cats.most_common(1)[0][0]})" if cats and cats.most_common(1)[0][0] else ""
        lines.append(f"- {f}/{cat}: {_plural(n, 'document')}{sub}, {t:,} tokens")
    if len(names) > MAX_LISTED_FOLDERS:
        lines.append(f"- ... and {len(names) - MAX_LISTED_FOLDERS} more folders (see room.folders)")
    folders = room.folders
    depth2 = ""
    if depth < max_depth and variant is not None and "depth2" in variant.sections:
        depth2 = variant.sections["depth2"]
    target = room.target if isinstance(room.target, dict) else {"name": str(room.target)}
    deal = room.deal if isinstance(room.deal, dict) else {"type": str(room.deal)}
    return {
        "room_name": room.name,
        "target_name": target.get("name", room.name),
        "target": _describe(target, "name", TARGET_KEYS),
        "deal": _describe(deal, "type", DEAL_KEYS),
        "n_documents": f"{len(room.documents):,}",
        "total_tokens": f"{room.n_tokens:,}",
        "n_folders": f"{len(folders):,}",
        "n_top_folders": f"{len(names):,}",
        "folder_table": "\n".join(lines),
        "subagent_context_tokens": f"{subagent_context_tokens:,}",
        "output_chars": f"{output_chars:,}",
        "max_turns": str(max_turns),
        "depth": str(depth),
        "depth2": depth2,
        "subagent_budget": f"{subagent_budget_tokens:,}" if subagent_budget_tokens else "no",
    }


def strip_extra_keys(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Messages as a chat API expects them: role and content only."""
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def build_messages(
    variant: PromptVariant, room_view_info: dict[str, Any], task: str | None = None
) -> list[dict]:
    """System prompt, the worked example (marked), then the task.

    ``task`` replaces the variant's task message (a depth-2 child gets its
    parent's request rendered through the ``child_task`` section).
    """
    system = render(variant.system, room_view_info, where=f"{variant.source} [system]")
    if task is None:
        task = render(variant.task, room_view_info, where=f"{variant.source} [task]")
    return [
        {"role": "system", "content": system},
        *[dict(m) for m in variant.example],
        {"role": "user", "content": task},
    ]
