"""The warehouse rows a grading writes, the same for every judge.

Per (trajectory, judge): one `grades` row per criterion verdict and one
`memo_scores` row of recall, precision and headline, both stamped with the
grader version so a regrade can tell old rows from new ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pipeline import db
from pipeline.grading.llm_judge import Verdict
from pipeline.grading.reference import GRADER_VERSION, MemoGrade
from pipeline.rooms.model import Criterion


def grade_rows(
    trajectory_id: str, judge: str, verdicts: Sequence[Verdict], criteria: Mapping[str, Criterion]
) -> list[dict[str, Any]]:
    """`grades` rows for one memo's verdicts; ``criteria`` maps criterion id to its criterion.

    Each row carries its criterion's kind and trap flag, so the score views need no join.
    """
    return [
        {
            "trajectory_id": trajectory_id,
            "criterion_id": criteria[cid].criterion_id,
            "judge": judge,
            "passed": passed,
            "reason": reason,
            "graded_at": db.now(),
            "kind": criteria[cid].kind,
            "is_trap": criteria[cid].is_trap,
            "grader_version": GRADER_VERSION,
        }
        for cid, passed, reason in verdicts
    ]


def score_row(trajectory_id: str, judge: str, grade: MemoGrade) -> dict[str, Any]:
    """The `memo_scores` row of one memo: its grade's summary."""
    return {"trajectory_id": trajectory_id, "judge": judge, **grade.summary(), "graded_at": db.now()}
