"""Criterion checking: does one unit of a memo hold every field of a rubric criterion?

The field matching both judges' scores rest on: the reference judge
(pipeline.grading.reference) adds its reading rules on top, and the
extractive backend (pipeline.llm.extractive) matches phrases the same way.

A memo is cut into *units*: paragraphs (blocks separated by blank lines); a
paragraph that is a list is cut further into its items (a line starting with
``-``, ``*``, ``+``, ``•`` or ``1.`` / ``1)`` / ``a)`` starts an item, following
lines continue it), and each row of a Markdown table (a line starting with
``|``) is a unit of its own. Items are units because memos often list one
finding per bullet without blank lines between; treating the whole list as one
paragraph would let fields of unrelated findings combine.

A non-trap criterion passes when ONE unit holds every entity, at least one
phrase of each ``any_of`` group, every amount (any written form, relative
tolerance), every path (the full path or its file name) and none of
``forbidden``. A trap passes unless some unit holds the trap's fields, i.e.
unless the memo flags the decoy. Matching is case-insensitive on text whose
hyphens/dashes become spaces and whose whitespace is collapsed, so
"change-of-control" matches "change of control". A phrase must begin at a
word start (so stems work: "terminat" matches "terminate"); an entity must
also end at a word end ("Acme" does not match "Acmeville").
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable

from pipeline.rooms.model import Amount, Criterion

_BULLET = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,3}[.)]|[a-zA-Z][.)]|\(\w{1,3}\))\s+")
_DASHES = re.compile(r"[-\u2010-\u2015_]+")
_SPACES = re.compile(r"\s+")

# a memo unit ready for matching: (text, normalised text, amounts in it)
PreparedUnit = tuple[str, str, list[float]]

_CURRENCY_PRE = r"(?:US\$|U\.S\.\s?\$|USD|EUR|GBP|CHF|JPY|CAD|AUD|C\$|A\$|\$|€|£|¥)"
_CURRENCY_SUF = r"(?:USD|EUR|GBP|CHF|dollars|euros|pounds)"
_NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+"
# scale words may follow after a space; single-letter scales must be attached ("1.25m", "$3M", "750k")
_SCALE_WORD = r"trillion|billion|million|thousand|bn|mm|mln|mn|tn"
_SCALE_LETTER = r"[mkbMKB]"
_AMOUNT = re.compile(
    rf"(?<![\w.,])(?P<pre>{_CURRENCY_PRE})?\s?(?P<num>{_NUMBER})"
    rf"(?:\s?(?P<word>{_SCALE_WORD})\b|(?P<letter>{_SCALE_LETTER})\b)?"
    rf"(?:\s?(?P<suf>{_CURRENCY_SUF})\b)?",
    re.IGNORECASE,
)
_SCALES = {
    "thousand": 1e3,
    "k": 1e3,
    "million": 1e6,
    "m": 1e6,
    "mm": 1e6,
    "mn": 1e6,
    "mln": 1e6,
    "billion": 1e9,
    "bn": 1e9,
    "b": 1e9,
    "trillion": 1e12,
    "tn": 1e12,
}


def normalize(text: str) -> str:
    """Lower case, dashes and underscores as spaces, whitespace collapsed."""
    return _SPACES.sub(" ", _DASHES.sub(" ", text.lower().replace("\u2019", "'")))


def parse_amounts(text: str) -> list[float]:
    """Every money-like amount in ``text``, in currency units, in order.

    Understands "$1.25 million", "USD 1,250,000", "$1,250,000", "1.25m", "$1.25M",
    "EUR 3 million", "$750k", "3,000,000 dollars", "US$2.5bn". A bare number counts
    only when it is written with thousands separators or has five or more digits,
    so years ("2021") and section numbers ("12.4") are not read as amounts.
    """
    out: list[float] = []
    for m in _AMOUNT.finditer(text):
        num = m.group("num")
        scale = (m.group("word") or m.group("letter") or "").lower()
        has_currency = bool(m.group("pre") or m.group("suf"))
        grouped = "," in num
        digits = len(num.split(".")[0].replace(",", ""))
        if not (has_currency or scale or grouped or digits >= 5):
            continue
        try:
            value = float(num.replace(",", ""))
        except ValueError:
            continue
        out.append(value * _SCALES.get(scale, 1.0))
    return out


def units(memo: str) -> list[str]:
    """The memo's units: paragraphs, with list items and table rows split out (see module docstring)."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", memo):
        current: list[str] = []
        for line in block.splitlines():
            if not line.strip():
                continue
            if line.lstrip().startswith("|") or _BULLET.match(line):
                if current:
                    out.append("\n".join(current))
                current = [line]
                if line.lstrip().startswith("|"):
                    out.append(line)
                    current = []
            else:
                current.append(line)
        if current:
            out.append("\n".join(current))
    return [u for u in out if u.strip()]


def _amount_in(a: Amount, values: list[float]) -> bool:
    tol = abs(a.value) * a.tolerance + 1e-9
    return any(abs(v - a.value) <= tol for v in values)


def _path_in(path: str, norm_unit: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return norm_phrase(path) in norm_unit or norm_phrase(name) in norm_unit


@functools.lru_cache(maxsize=65536)
def phrase_pattern(phrase: str, whole_word: bool) -> re.Pattern[str]:
    # a phrase must start at a word start ("terminat" matches "terminate", not "exterminate");
    # an entity must also end at a word end ("Acme" does not match "Acmeville")
    end = r"(?!\w)" if whole_word and phrase[-1:].isalnum() else ""
    start = r"(?<!\w)" if phrase[:1].isalnum() else ""
    return re.compile(start + re.escape(phrase) + end)


@functools.lru_cache(maxsize=65536)
def norm_phrase(phrase: str) -> str:
    """``phrase`` normalised as units are (cached: rubric phrases repeat across units)."""
    return normalize(phrase).strip() if phrase.strip() else phrase


def has_phrase(norm_unit: str, phrase: str, whole_word: bool = False) -> bool:
    p = norm_phrase(phrase)
    return p in norm_unit and bool(phrase_pattern(p, whole_word).search(norm_unit))


def missing(c: Criterion, unit: str, norm: str | None = None, values: list[float] | None = None) -> list[str]:
    """What ``unit`` lacks to satisfy ``c``'s fields (empty when it satisfies them)."""
    norm = normalize(unit) if norm is None else norm
    lack = [f"entity {e!r}" for e in c.entities if not has_phrase(norm, e, whole_word=True)]
    for group in c.any_of:
        if not any(has_phrase(norm, p) for p in group):
            lack.append(f"one of {group[:4]!r}")
    if c.amounts:
        values = parse_amounts(unit) if values is None else values
        lack += [f"amount {a.value:,.0f}" for a in c.amounts if not _amount_in(a, values)]
    lack += [f"path {p!r}" for p in c.paths if not _path_in(p, norm)]
    lack += [f"forbidden {f!r} present" for f in c.forbidden if has_phrase(norm, f)]
    return lack


def _prepared(memo: str) -> list[PreparedUnit]:
    return [(u, normalize(u), parse_amounts(u)) for u in units(memo)]


def check_units(
    c: Criterion,
    prepared: list[PreparedUnit],
    also: Callable[[str], list[str]] | None = None,
    nothing: str = "memo is empty",
) -> tuple[bool, str]:
    """(passed, reason): does one unit hold every field of ``c`` (a trap passes when none does)?

    ``also(normalised unit)`` may name further things a unit lacks (the
    reference judge asks that the finding be asserted, not negated).
    """
    best: tuple[int, list[str]] | None = None
    for i, (u, norm, values) in enumerate(prepared):
        lack = missing(c, u, norm, values)
        if not lack and also is not None:
            lack = also(norm)
        if not lack:
            if c.is_trap:
                return False, f"unit {i + 1} flags the decoy"
            return True, f"unit {i + 1} has every field"
        if best is None or len(lack) < len(best[1]):
            best = (i, lack)
    if c.is_trap:
        return True, "no unit flags the decoy"
    if best is None:
        return False, nothing
    return False, f"no unit has every field; closest (unit {best[0] + 1}) lacks " + ", ".join(best[1][:4])


def check_criterion(c: Criterion, memo: str) -> tuple[bool, str]:
    """(passed, one-line reason) for one criterion."""
    return check_units(c, _prepared(memo))


def grade_memo(criteria: Iterable[Criterion], memo: str) -> list[tuple[str, bool, str]]:
    """(criterion_id, passed, reason) for every criterion; the memo is cut and parsed once."""
    prepared = _prepared(memo)
    return [(c.criterion_id, *check_units(c, prepared)) for c in criteria]
