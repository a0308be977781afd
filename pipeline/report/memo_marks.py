"""The memo as the reference judge read it, unit by unit, with each verdict placed on its unit.

The judge records one line per criterion ("unit 3 has every field", "no unit
has every field; closest (unit 2) lacks amount 1,250,000", "unit 4 flags the
decoy"), numbering the units it kept after the reading budget and quotation
(pipeline.grading.reference). To place those verdicts, this module asks the
judge to read the memo again (ReferenceGrader.read: the budget cut, the units,
quotation and near copies cut per unit, repeated units set aside) and keeps its
trail of every unit, then the claims per unit. The numbers agree with the stored verdicts
only while the grader version is the one that graded, so the page says when
it is not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pipeline.grading.memo_text import cut_to_budget
from pipeline.grading.reference import ReferenceGrader

_UNIT_REF = re.compile(r"\bunit (\d+)\b")
_LACKS = re.compile(r"\blacks (.*)$")


@dataclass
class Unit:
    text: str  # the memo's own text of this unit
    number: int | None  # the judge's unit number (1-based); None when it read nothing of it
    read_as: str = ""  # what the judge read when it cut quotation out ("" = as written)
    quoted_words: int = 0  # words set aside as copied from the room
    copied: bool = False  # the whole unit is quotation: it satisfies nothing
    repeat: str = (
        ""  # "repeat": a near copy of an earlier unit, set aside; "padding": a further one (claims false)
    )
    passed: list[dict] = field(default_factory=list)  # criteria this unit passed
    closest: list[dict] = field(default_factory=list)  # failed criteria whose closest unit this is
    flagged_decoys: list[dict] = field(default_factory=list)  # traps this unit failed
    true_claims: int = 0
    false_claims: list[str] = field(default_factory=list)  # "kind @ refs" as the judge recorded them


@dataclass
class MarkedMemo:
    units: list[Unit]
    unread: str  # the part past the reading budget: never graded
    budget_words: int
    memo_words: int


def unit_of(reason: str) -> int | None:
    """The unit number a reference verdict names, if any."""
    m = _UNIT_REF.search(reason or "")
    return int(m.group(1)) if m else None


def missing_of(reason: str) -> str:
    """What a failed verdict says the closest unit lacks ('' when it names nothing)."""
    m = _LACKS.search(reason or "")
    return m.group(1) if m else ""


def mark(memo: str, grader: ReferenceGrader, verdicts: list[dict]) -> MarkedMemo:
    """The memo's units with ``verdicts`` (reference `grades` rows with criterion text) placed on them."""
    reading = grader.read(memo or "")
    text, n_words, _ = cut_to_budget(memo or "", grader.budget_words)
    out: list[Unit] = []
    by_number: dict[int, Unit] = {}
    for t in reading.trail:
        unit = Unit(t.raw, t.number, read_as=t.read_as, quoted_words=t.quoted_words)
        unit.copied = t.state == "copied"
        unit.repeat = t.state if t.state in ("repeat", "padding") else ""
        unit.true_claims, unit.false_claims = grader.claims(t, reading)
        if t.number is not None:
            by_number[t.number] = unit
        out.append(unit)
    for v in verdicts:
        unit = by_number.get(unit_of(v.get("reason") or ""))
        if unit is None:
            continue
        if v.get("is_trap") and v.get("passed") is False:
            unit.flagged_decoys.append(v)
        elif v.get("passed"):
            unit.passed.append(v)
        elif v.get("passed") is False:
            unit.closest.append(v)
    return MarkedMemo(out, (memo or "")[len(text) :].strip(), grader.budget_words, n_words)
