"""Reference judge: amount parsing, memo units, criterion semantics, and grading generated rooms."""

from __future__ import annotations

import pytest

from pipeline.grading.criteria import check_criterion, grade_memo, parse_amounts, units
from pipeline.grading.known_answers import evidence_memo
from pipeline.rooms.model import Amount, Criterion
from pipeline.rooms.synthetic.generator import generate_room


@pytest.mark.parametrize(
    "text, value",
    [
        ("$1.25 million", 1_250_000),
        ("USD 1,250,000", 1_250_000),
        ("$1,250,000", 1_250_000),
        ("1.25m", 1_250_000),
        ("$1.25M", 1_250_000),
        ("EUR 3 million", 3_000_000),
        ("€3m", 3_000_000),
        ("US$2.5bn", 2_500_000_000),
        ("$750k", 750_000),
        ("3,000,000 dollars", 3_000_000),
        ("$4.2 billion", 4_200_000_000),
        ("$12mm", 12_000_000),
        ("GBP 950,000.50", 950_000.5),
        ("about 48,213 records", 48_213),
        ("a fee of $900", 900),
    ],
)
def test_parse_amounts_written_forms(text, value):
    assert parse_amounts(text) == [pytest.approx(value)]


def test_parse_amounts_ignores_years_sections_and_words():
    assert parse_amounts("In 2021, under Section 12.4 and clause 3, for 30 days, over 5 months") == []
    assert parse_amounts("$1.5 million in 2023 and USD 200,000 later") == [1_500_000, 200_000]


def test_units_split_paragraphs_bullets_and_table_rows():
    memo = (
        "Intro line one\ncontinues here.\n\n- first finding\n  wraps onto this line\n- second finding\n\n"
        "| Issue | Path |\n|---|---|\n| Acme | a.txt |\n\n1. numbered item\n2) another item"
    )
    got = units(memo)
    assert got[0] == "Intro line one\ncontinues here."
    assert got[1] == "- first finding\n  wraps onto this line"
    assert got[2] == "- second finding"
    assert "| Acme | a.txt |" in got
    assert got[-2:] == ["1. numbered item", "2) another item"]
    assert units("") == [] and units("\n\n  \n") == []


def crit(**kw) -> Criterion:
    base = dict(criterion_id="I01-identify", kind="identify", text="t")
    base.update(kw)
    return Criterion(**base)


def test_one_unit_must_hold_every_field():
    c = crit(
        entities=["Acme Corp"],
        any_of=[["change of control", "change in control"], ["terminat"]],
        paths=["03_material_contracts/acme/msa_acme.txt"],
    )
    ok = "ACME CORP may terminate on a change-of-control (see msa_acme.txt)."
    assert check_criterion(c, ok)[0]
    assert check_criterion(
        c, "See 03_material_contracts/acme/msa_acme.txt: Acme Corp can terminate on a Change in Control."
    )[0]
    split = "Acme Corp may terminate the agreement.\n\nThere is a change of control clause (msa_acme.txt)."
    passed, reason = check_criterion(c, split)
    assert not passed and "lacks" in reason
    assert not check_criterion(c, "Acme Corp may terminate on a change of control.")[0]  # no path
    assert not check_criterion(c, "Beta Inc may terminate on a change of control (msa_acme.txt).")[0]
    assert not check_criterion(c, "")[0]


def test_bullets_are_separate_units():
    c = crit(entities=["Acme"], any_of=[["mfn"]])
    assert not check_criterion(c, "Findings:\n- Acme: uncapped indemnity\n- Beta: MFN clause")[0]
    assert check_criterion(c, "Findings:\n- Acme: MFN clause\n- Beta: uncapped indemnity")[0]


def test_forbidden_phrases_and_traps():
    trap = crit(
        criterion_id="D01-trap",
        kind="trap",
        is_trap=True,
        entities=["Zeta Labs"],
        any_of=[["change of control"]],
        forbidden=["deleted"],
    )
    assert check_criterion(trap, "")[0]
    assert check_criterion(trap, "Zeta Labs change of control right was deleted by Amendment No. 1.")[0]
    passed, reason = check_criterion(trap, "Zeta Labs may terminate on a change of control.")
    assert not passed and "decoy" in reason
    assert check_criterion(trap, "Zeta Labs is a customer.\n\nSomeone has a change of control right.")[0]


def test_amounts_match_any_form_within_tolerance():
    c = crit(kind="quantify", entities=["Acme"], amounts=[Amount(1_250_000, 0.02)])
    for memo in ("Acme claims $1.25 million.", "Acme: USD 1,250,000", "Acme 1.25m", "Acme ~$1.26M"):
        assert check_criterion(c, memo)[0], memo
    for memo in ("Acme claims $2.5 million.", "Acme claims $1.4 million.", "Acme claims a large sum."):
        assert not check_criterion(c, memo)[0], memo


def test_grade_memo_reports_every_criterion_in_order():
    cs = [crit(criterion_id="a", entities=["x"]), crit(criterion_id="b", entities=["y"])]
    got = grade_memo(cs, "x only")
    assert [(i, p) for i, p, _ in got] == [("a", True), ("b", False)]
    assert all(isinstance(r, str) and r for _, _, r in got)


ROOMS = [("s0", 0, 20), ("s1", 1, 20), ("s2", 2, 20), ("m7", 7, 200)]


@pytest.fixture(scope="module", params=ROOMS, ids=[r[0] for r in ROOMS])
def room(request):
    name, seed, n = request.param
    return generate_room(name, seed=seed, n_documents=n, tokens_per_document=300)


def test_evidence_memo_passes_the_rubric(room):
    memo = evidence_memo(room)
    grades = grade_memo(room.criteria, memo)
    passed = sum(p for _, p, _ in grades)
    assert passed >= 0.95 * len(grades), [g for g in grades if not g[1]]
    by_id = {c.criterion_id: c for c in room.criteria}
    assert all(p for i, p, _ in grades if by_id[i].is_trap)


def test_empty_memo_passes_only_traps(room):
    for (cid, passed, _), c in zip(grade_memo(room.criteria, ""), room.criteria, strict=True):
        assert passed == c.is_trap, cid


def test_pasting_the_room_fails_every_trap(room):
    memo = "\n\n".join(d.text for d in room.documents)
    # a filed side letter's trap is an absence claim, and agreeing fees' a claim that two figures differ:
    # no document of the room makes either
    claimed_by_none = ("decoy_side_letter_filed", "decoy_fees_agree")
    traps = [c for c in room.criteria if c.is_trap and c.issue_kind not in claimed_by_none]
    # (a small room may hold one decoy, and that one of these two)
    assert traps or all(c.issue_kind in claimed_by_none for c in room.criteria if c.is_trap)
    assert not any(p for _, p, _ in grade_memo(traps, memo))


def test_wrong_amount_fails_quantify(room):
    memo = evidence_memo(room)
    quantify = [c for c in room.criteria if c.kind == "quantify"]
    assert quantify
    for c in quantify:
        right = f"{' '.join(c.entities)}: {c.amounts[0].value / 1e6:.4f} million"
        wrong = f"{' '.join(c.entities)}: ${c.amounts[0].value * 2:,.0f}"
        assert check_criterion(c, right)[0], right
        assert not check_criterion(c, wrong)[0], wrong
        assert check_criterion(c, memo)[0]
