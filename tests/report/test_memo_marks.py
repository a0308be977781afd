"""The trajectory page places each verdict on the unit the reference judge read, including after units it set
aside (repeats, copies), and its claims per unit add up to the judge's own count."""

from __future__ import annotations

import random

from pipeline.grading.adversarial import repetition_memo
from pipeline.grading.known_answers import known_memos
from pipeline.grading.reference import ReferenceGrader
from pipeline.report.memo_marks import mark, unit_of
from pipeline.rooms.synthetic.generator import generate_room


def _rows(grade) -> list[dict]:
    return [{"criterion_id": cid, "passed": p, "reason": r, "is_trap": False} for cid, p, r in grade.verdicts]


def test_verdicts_land_on_the_units_the_judge_named_after_a_repeat():
    room = generate_room("marks", seed=11, n_documents=8, tokens_per_document=200)
    grader = ReferenceGrader(room)
    oracle = known_memos(room)["oracle"]
    first = oracle.split("\n\n")[1]
    memo = oracle.replace(first, f"{first}\n\n{first}\n\n{first}", 1)  # the same unit three times
    grade = grader.grade(memo)
    marked = mark(memo, grader, _rows(grade))

    states = [u.repeat for u in marked.units]
    assert states.count("repeat") == 1 and states.count("padding") == 1
    read = [u for u in marked.units if u.number is not None]
    assert [u.number for u in read] == list(range(1, len(read) + 1))
    # every passed verdict sits on the unit it names, and that unit's text carries it
    for cid, passed, reason in grade.verdicts:
        if passed and unit_of(reason):
            unit = next(u for u in read if u.number == unit_of(reason))
            assert cid in [v["criterion_id"] for v in unit.passed]
    assert sum(len(u.passed) for u in marked.units) == sum(
        1 for _, p, r in grade.verdicts if p and unit_of(r)
    )
    # the padding unit's claims are false, as the judge counts them
    padding = next(u for u in marked.units if u.repeat == "padding")
    assert padding.true_claims == 0 and all(c.startswith("repeated ") for c in padding.false_claims)


def test_a_repetition_memos_false_claims_show_on_the_page():
    room = generate_room("marks-rep", seed=12, n_documents=8, tokens_per_document=200)
    grader = ReferenceGrader(room)
    memo = repetition_memo(room, random.Random(3))
    grade = grader.grade(memo)
    marked = mark(memo, grader, _rows(grade))
    shown_false = sum(len(u.false_claims) for u in marked.units)
    assert grade.n_false_claims > 0 and shown_false >= grade.n_false_claims
