"""Load a hand-written rubric for an imported room from YAML or JSONL.

The schema is documented in docs/rubric-file.md. Every error names the file,
the row (1-based line for JSONL, 1-based item number and its line for YAML)
and the field, so a room author can fix the file without guessing.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml

from pipeline.rooms.model import CRITERION_KINDS, Amount, Criterion
from pipeline.rooms.store import RoomError

REQUIRED = ("criterion_id", "kind", "text")
OPTIONAL = (
    "issue_id",
    "issue_kind",
    "is_trap",
    "entities",
    "any_of",
    "amounts",
    "paths",
    "forbidden",
    "evidence",
    "evidence_paths",
)
assert set(REQUIRED + OPTIONAL) == {f.name for f in fields(Criterion)}
# The reference judge checks these; a criterion with none of them would pass
# (or, as a trap, fail) on every memo.
CHECKED = ("entities", "any_of", "amounts", "paths")


def load_rubric(path: str | Path, doc_paths: set[str]) -> list[Criterion]:
    """Criteria from a ``.yaml``/``.yml`` or ``.jsonl`` file, checked against the room's document paths."""
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RoomError(f"{path}: rubric file not found") from None
    except UnicodeDecodeError as e:
        raise RoomError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    ext = path.suffix.lower()
    if ext in (".yaml", ".yml"):
        rows = _yaml_rows(path, raw)
    elif ext == ".jsonl":
        rows = _jsonl_rows(path, raw)
    else:
        raise RoomError(f"{path}: rubric files are .yaml, .yml or .jsonl, not {ext or 'extensionless'}")
    if not rows:
        raise RoomError(f"{path}: the rubric has no criteria")
    criteria: list[Criterion] = []
    first_seen: dict[str, str] = {}
    for where, item in rows:
        c = _criterion(f"{path}: {where}", item, doc_paths)
        if c.criterion_id in first_seen:
            raise RoomError(
                f"{path}: {where}: field 'criterion_id': duplicate id {c.criterion_id!r}"
                f" (first at {first_seen[c.criterion_id]})"
            )
        first_seen[c.criterion_id] = where
        criteria.append(c)
    return criteria


def _yaml_rows(path: Path, raw: str) -> list[tuple[str, Any]]:
    try:
        data = yaml.safe_load(raw)
        node = yaml.compose(raw)  # the same document again, for line numbers
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise RoomError(f"{path}: invalid YAML{at}: {getattr(e, 'problem', None) or e}") from None
    if data is None:
        return []
    if isinstance(data, dict):
        if set(data) != {"criteria"}:
            raise RoomError(f"{path}: top level is a list of criteria or a mapping with one key 'criteria'")
        data = data["criteria"]
        node = next(v for k, v in node.value if k.value == "criteria")
    if not isinstance(data, list):
        raise RoomError(f"{path}: top level is a list of criteria, not {type(data).__name__}")
    return [
        (f"item {i + 1} (line {n.start_mark.line + 1})", item)
        for i, (item, n) in enumerate(zip(data, node.value, strict=True))
    ]


def _jsonl_rows(path: Path, raw: str) -> list[tuple[str, Any]]:
    rows = []
    for n, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((f"line {n}", json.loads(line)))
        except json.JSONDecodeError as e:
            raise RoomError(f"{path}: line {n}: invalid JSON: {e.msg} (column {e.colno})") from None
    return rows


def _criterion(where: str, item: Any, doc_paths: set[str]) -> Criterion:
    if not isinstance(item, dict):
        raise RoomError(f"{where}: a criterion is a mapping of fields, not {type(item).__name__}")
    for key in item:
        if key not in REQUIRED + OPTIONAL:
            near = difflib.get_close_matches(str(key), REQUIRED + OPTIONAL, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise RoomError(f"{where}: field {key!r}: unknown field{hint}")
    for key in REQUIRED:
        if item.get(key) in (None, ""):
            raise RoomError(f"{where}: field {key!r}: required field missing")
    cid = _string(where, "criterion_id", item["criterion_id"])
    kind = _string(where, "kind", item["kind"])
    if kind not in CRITERION_KINDS:
        raise RoomError(f"{where}: field 'kind': unknown kind {kind!r} (one of {', '.join(CRITERION_KINDS)})")
    is_trap = item.get("is_trap", kind == "trap")
    if not isinstance(is_trap, bool):
        raise RoomError(f"{where}: field 'is_trap': true or false, not {is_trap!r}")
    if kind == "trap" and not is_trap:
        raise RoomError(f"{where}: field 'is_trap': a criterion of kind 'trap' is a trap")
    c = Criterion(
        criterion_id=cid,
        kind=kind,
        text=_string(where, "text", item["text"]),
        issue_id=_optional_string(where, "issue_id", item.get("issue_id")),
        issue_kind=_optional_string(where, "issue_kind", item.get("issue_kind")),
        is_trap=is_trap,
        entities=_strings(where, "entities", item.get("entities", [])),
        any_of=_groups(where, item.get("any_of", [])),
        amounts=_amounts(where, item.get("amounts", [])),
        paths=_room_paths(where, "paths", item.get("paths", []), doc_paths),
        forbidden=_strings(where, "forbidden", item.get("forbidden", [])),
        evidence=_optional_string(where, "evidence", item.get("evidence")) or "",
        evidence_paths=_room_paths(where, "evidence_paths", item.get("evidence_paths", []), doc_paths),
    )
    if not any(getattr(c, f) for f in CHECKED):
        raise RoomError(
            f"{where}: field 'entities': a criterion needs at least one of {', '.join(CHECKED)}"
            " (the reference judge has nothing else to check)"
        )
    return c


def _string(where: str, name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RoomError(f"{where}: field {name!r}: a non-empty string, not {value!r}")
    return value


def _optional_string(where: str, name: str, value: Any) -> str | None:
    return None if value is None else _string(where, name, value)


def _strings(where: str, name: str, value: Any) -> list[str]:
    if not isinstance(value, list):
        raise RoomError(f"{where}: field {name!r}: a list of strings, not {type(value).__name__}")
    return [_string(where, f"{name}[{i}]", v) for i, v in enumerate(value)]


def _groups(where: str, value: Any) -> list[list[str]]:
    if not isinstance(value, list) or not all(isinstance(g, list) for g in value):
        raise RoomError(
            f"{where}: field 'any_of': a list of phrase groups (lists of strings), e.g. "
            '[["change of control", "change in control"]], not ' + repr(value)
        )
    out = []
    for i, g in enumerate(value):
        if not g:
            raise RoomError(f"{where}: field 'any_of[{i}]': an empty group can never match")
        out.append(_strings(where, f"any_of[{i}]", g))
    return out


def _amounts(where: str, value: Any) -> list[Amount]:
    if not isinstance(value, list):
        raise RoomError(f"{where}: field 'amounts': a list of {{value, tolerance}} mappings")
    out = []
    for i, a in enumerate(value):
        name = f"amounts[{i}]"
        if not isinstance(a, dict):
            raise RoomError(f"{where}: field {name!r}: a mapping {{value, tolerance}}, not {a!r}")
        for key in a:
            if key not in ("value", "tolerance"):
                raise RoomError(f"{where}: field '{name}.{key}': unknown field (value, tolerance)")
        if "value" not in a:
            raise RoomError(f"{where}: field '{name}.value': required field missing")
        val = _number(where, f"{name}.value", a["value"])
        tol = _number(where, f"{name}.tolerance", a.get("tolerance", Amount.tolerance))
        if tol < 0:
            raise RoomError(f"{where}: field '{name}.tolerance': a relative tolerance >= 0, not {tol}")
        out.append(Amount(value=val, tolerance=tol))
    return out


def _number(where: str, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RoomError(f"{where}: field {name!r}: a number, not {value!r}")
    return float(value)


def _room_paths(where: str, name: str, value: Any, doc_paths: set[str]) -> list[str]:
    paths = _strings(where, name, value)
    for p in paths:
        if p not in doc_paths:
            near = difflib.get_close_matches(p, sorted(doc_paths), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise RoomError(f"{where}: field {name!r}: {p!r} is not a document in the room{hint}")
    return paths
