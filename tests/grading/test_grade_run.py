"""The library side of the grade stage: judge names, and the rows both judges write."""

from __future__ import annotations

import pytest

from pipeline.config import load_config
from pipeline.grading.grade_rows import grade_rows, score_row
from pipeline.grading.grade_run import check_judges, llm_judge_name
from pipeline.grading.reference import GRADER_VERSION, ReferenceGrader
from pipeline.rooms.model import Criterion, Document, Room


def _room() -> Room:
    crit = [
        Criterion("I1-identify", "identify", "t", "I1", "coc_termination", entities=["Bluefin"], any_of=[["change of control"]]),
        Criterion("T1", "trap", "t", "T1", "coc_termination", is_trap=True, entities=["Zeta"], any_of=[["change of control"]]),
    ]  # fmt: skip
    docs = [Document("contracts/msa.txt", "contract", "MSA", "Bluefin may terminate on a change of control.")]
    return Room("r", {"name": "Heron"}, {"type": "merger"}, docs, crit, source="generated")


def test_unknown_judges_are_named():
    check_judges(["reference", "llm"])
    with pytest.raises(ValueError, match=r"unknown judge\(s\) \['gpt'\]"):
        check_judges(["reference", "gpt"])


def test_llm_judge_name_is_the_model_or_the_backend_kind():
    cfg = load_config("tiny", ["models.judge.kind=scripted", "models.judge.model=judge-x"])
    assert llm_judge_name(cfg) == "llm:judge-x"
    cfg.models.judge.model = ""
    assert llm_judge_name(cfg) == "llm:scripted"


def test_rows_carry_kind_trap_flag_version_and_ungraded_verdicts():
    room = _room()
    by_id = {c.criterion_id: c for c in room.criteria}
    rows = grade_rows("t1", "llm:x", [("I1-identify", True, "ok"), ("T1", None, "ungraded")], by_id)
    assert [(r["criterion_id"], r["judge"], r["passed"], r["kind"], r["is_trap"]) for r in rows] == [
        ("I1-identify", "llm:x", True, "identify", False),
        ("T1", "llm:x", None, "trap", True),
    ]
    assert all(r["trajectory_id"] == "t1" and r["grader_version"] == GRADER_VERSION for r in rows)

    grade = ReferenceGrader(room).grade("Bluefin may end the deal on a change of control.")
    score = score_row("t1", "reference", grade)
    assert score["trajectory_id"] == "t1" and score["judge"] == "reference"
    assert score["recall"] == grade.recall and score["headline"] == grade.headline
    assert score["grader_version"] == GRADER_VERSION
