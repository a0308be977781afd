"""Conflicts: two documents state different fees for one customer contract.

No one document shows a conflict: the agreement states its fees, the finance team's revenue schedule
another figure, and each reads as ordinary. Only a root that asks its subagents for the fees and
compares the answers across documents can state both figures; a memo that calls every figure
inconsistent fails the trap of a contract whose two figures agree, and its claims are false.
"""

from __future__ import annotations

import re

import pytest

from pipeline.grading.known_answers import claim_conflict_memo
from pipeline.grading.reference import ReferenceGrader
from pipeline.llm.extractive import extract
from pipeline.rooms.synthetic.generator import generate_room


@pytest.fixture(scope="module")
def room():
    """The first generated room of the default size with both a fee conflict and fees that agree."""
    for seed in range(60):
        r = generate_room(f"conflict-{seed}", seed=seed, n_documents=160, tokens_per_document=600)
        kinds = {c.issue_kind for c in r.criteria}
        if {"value_conflict", "decoy_fees_agree"} <= kinds:
            return r
    raise AssertionError("no room of 60 seeds plants both")


def _crit(room, kind: str):
    return next(c for c in room.criteria if c.issue_kind == "value_conflict" and c.kind == kind)


def _verdicts(room, memo: str) -> dict[str, bool]:
    grade = ReferenceGrader(room).grade(memo)
    return {v[0]: v[1] for v in grade.verdicts}, grade


def test_each_document_states_one_figure_and_the_figures_differ(room):
    c = _crit(room, "conflict")
    agreement, schedule = c.paths
    fees, stated = (a.value for a in c.amounts)
    assert fees != stated
    texts = {d.path: d.text for d in room.documents}
    assert f"${fees:,.0f}" in texts[agreement] and f"${stated:,.0f}" not in texts[agreement]
    assert f"${stated:,.0f}" in texts[schedule] and f"${fees:,.0f}" not in texts[schedule]
    decoy = next(c for c in room.criteria if c.issue_kind == "decoy_fees_agree")
    a, s = decoy.evidence_paths
    figure = re.search(r"\$[\d,]+", decoy.evidence).group()
    assert figure in texts[a] and figure in texts[s]


def test_the_reader_reports_the_fees_only_when_asked(room):
    c = _crit(room, "conflict")
    asked = [extract(f"Contract fees per year.\n=== {p} ===\n{t}") for p, t in _docs(room, c.paths)]
    amounts = [f'"${a.value:,.0f}"' for a in c.amounts]
    assert all(len(a) == 1 and m in a[0] for a, m in zip(asked, amounts, strict=True))
    unasked = [extract(f"=== {p} ===\n{t}") for p, t in _docs(room, c.paths)]
    assert all(a[0].startswith("No diligence issues found") for a in unasked)


def _docs(room, paths):
    texts = {d.path: d.text for d in room.documents}
    return [(p, texts[p]) for p in paths]


def test_a_memo_that_compares_both_documents_passes_and_one_document_does_not(room):
    c, ident, step = _crit(room, "conflict"), _crit(room, "identify"), _crit(room, "next_step")
    party = c.entities[0]
    (fees, stated), (agreement, schedule) = [a.value for a in c.amounts], c.paths
    both = (
        f"- The annual fees of {party} do not match: ${fees:,.0f} in {agreement}; ${stated:,.0f} in {schedule}. "
        f"Next step: reconcile the {party} fees with management."
    )
    verdicts, grade = _verdicts(room, both)
    assert verdicts[c.criterion_id] and verdicts[ident.criterion_id] and verdicts[step.criterion_id]
    assert grade.n_false_claims == 0
    one = f"- {party} pays fees of ${fees:,.0f} a year under {agreement}."
    verdicts, _ = _verdicts(room, one)
    assert not verdicts[c.criterion_id] and not verdicts[ident.criterion_id]


def test_calling_agreeing_fees_inconsistent_fails_the_trap(room):
    decoy = next(c for c in room.criteria if c.issue_kind == "decoy_fees_agree")
    party = decoy.entities[0]
    a, s = decoy.evidence_paths
    memo = f"- The annual fees of {party} do not match between {a} and {s}. Next step: reconcile them."
    verdicts, grade = _verdicts(room, memo)
    assert verdicts[decoy.criterion_id] is False and grade.traps_failed == 1 and grade.n_false_claims >= 1


def test_claiming_a_conflict_everywhere_scores_near_zero(room):
    _, grade = _verdicts(room, claim_conflict_memo(room))
    assert grade.headline <= 0.15 and grade.traps_failed >= 1
