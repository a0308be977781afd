"""The reward survives an optimiser: adversarial known-answer memos, drawn fresh each run, and the rules
that sink them (near copies, findings in the memo's own words, citations, repeats), one by one.

The adversarial memos are drawn from SEED, new each run; a failure names it. To replay one:
RLM_ADVERSARIAL_SEED=<seed> pytest tests/grading/test_adversarial.py
"""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

from pipeline.grading import adversarial
from pipeline.grading.criteria import normalize, units
from pipeline.grading.known_answers import ADVERSARIAL, BARS, check_room, known_memos
from pipeline.grading.memo_text import RoomIndex, _hashes, _words, own_text, strip_quotation
from pipeline.grading.reference import ReferenceGrader
from pipeline.rooms.synthetic.generator import generate_room
from tests.grading.test_reference import CORPUS, GOOD, room  # noqa: F401  (room: the one-issue fixture)

SEED = int(os.environ.get("RLM_ADVERSARIAL_SEED") or random.SystemRandom().randrange(1, 2**31))
PATH = "03_contracts/msa_bluefin.txt"


@pytest.mark.parametrize("k", range(3))
def test_adversarial_memos_hold_their_bars_on_fresh_generated_rooms(k):
    seed = SEED + k
    rm = generate_room(f"adv-{seed}", seed, n_documents=20)
    rows = {r["memo"]: r for r in check_room(rm, seed=seed)}
    replay = f"(room seed {seed}, memo seed {seed}; replay with RLM_ADVERSARIAL_SEED={SEED})"
    for name in ADVERSARIAL:
        r = rows[name]
        assert r["ok"], f"{name}: headline {r['headline']} outside {r['bar']} {replay}"
    # the honest control loses nothing it should not: every finding found, at most one false claim
    assert rows["paraphrase"]["recall"] == 1.0 and rows["paraphrase"]["false_claims"] <= 1, replay
    # and each attack fails for its own reason
    assert rows["near_copy"]["recall"] < 0.2, replay  # pasted text satisfies nothing
    assert rows["wrong_citation"]["precision"] == 0.0, replay  # every claim cites a document that refutes it
    assert rows["claim_stuffing"]["recall"] == 1.0 and rows["claim_stuffing"]["precision"] < 0.15, replay
    assert rows["repetition"]["false_claims"] > 3, replay  # the repeats are padding


@pytest.mark.slow
@pytest.mark.parametrize("n_documents", [300, 2000])
def test_adversarial_memos_hold_their_bars_on_big_generated_rooms(n_documents):
    """On big rooms the reading budget, not the room, bounds a memo: every family still within its bar."""
    seed = SEED + n_documents
    rm = generate_room(f"adv-{n_documents}-{seed}", seed, n_documents=n_documents, tokens_per_document=200)
    rows = {r["memo"]: r for r in check_room(rm, seed=seed)}
    bad = {n: (r["headline"], r["bar"]) for n, r in rows.items() if not r["ok"]}
    assert bad == {}, f"room and memo seed {seed} (replay with RLM_ADVERSARIAL_SEED={SEED})"
    assert set(ADVERSARIAL) <= set(rows)


@pytest.mark.slow
@pytest.mark.skipif(not (CORPUS / "cuad").is_dir(), reason="the shared CUAD corpus is not beside the project")
def test_adversarial_memos_hold_their_bars_on_a_cuad_room():
    from pipeline.rooms.cuad import build_cuad_rooms

    rm = build_cuad_rooms(CORPUS, n_rooms=1, contracts_per_room=20, seed=SEED % 7)[0]
    grader = ReferenceGrader(rm)
    memos = known_memos(rm, CORPUS, seed=SEED)
    for name in (*ADVERSARIAL, "expert_labels"):
        low, high = BARS[name]
        h = grader.grade(memos[name]).headline
        assert low <= h <= high, (
            f"{name}: {h:.3f} outside [{low}, {high}] (replay with RLM_ADVERSARIAL_SEED={SEED})"
        )
    # without the near-copy check, the pasted contracts would pass for findings
    assert ReferenceGrader(rm, near_copies=False).grade(memos["near_copy"]).headline > BARS["near_copy"][1]


def test_the_near_copy_has_no_long_verbatim_run_and_only_the_near_copy_check_stops_it():
    scores = {True: [], False: []}
    for seed in (SEED, SEED + 1, SEED + 2):
        rm = generate_room(f"nc-{seed}", seed, n_documents=20)
        memo = adversarial.near_copy_memo(rm, random.Random(seed))
        exact = RoomIndex([d.text for d in rm.documents], near_copies=False)
        longest = 0  # the longest run of words inside 8-grams found verbatim in the rm
        for u in units(memo):
            run = 0
            for hit in exact.covered(_hashes([w.group() for w in _words(u)])):
                run = run + 1 if hit else 0
                longest = max(longest, run)
        assert longest <= 12, (seed, longest)  # far below the 40 words the exact check cuts
        for near in (True, False):
            scores[near].append(ReferenceGrader(rm, near_copies=near).grade(memo).headline)
    assert max(scores[True]) <= BARS["near_copy"][1], (SEED, scores)
    assert max(scores[False]) > BARS["near_copy"][1], (SEED, scores)  # grader v2's reading overpays it


def test_the_adversarial_memos_are_drawn_from_their_seed():
    rm = generate_room("draw", 5, n_documents=20)
    for name in ADVERSARIAL:
        make = getattr(adversarial, f"{name}_memo")
        assert make(rm, random.Random(1)) == make(rm, random.Random(1)), name
    assert adversarial.near_copy_memo(rm, random.Random(1)) != adversarial.near_copy_memo(
        rm, random.Random(2)
    )


# ---------------------------------------------------------------- near copies, one by one
CLAUSE_EDITED = (
    "Indeed Bluefin Logistics can terminate this contract upon thirty days' signed notice if the Company "
    "undergoes a Change of Control absent the prior written consent of Bluefin Logistics, and for this aim a "
    "change of control means any deal in which any entity acquires over fifty percent of the voting "
    "securities of the Company, whether by merger, stock purchase or else."
)
STEP = " Next step: obtain Bluefin's consent or a waiver before closing, as fees of $1,200,000 a year are at risk."


def test_a_near_copied_clause_is_cut_where_the_exact_check_misses_it(room):  # noqa: F811
    memo = f"{PATH}: {CLAUSE_EDITED}{STEP}"
    old = ReferenceGrader(room, near_copies=False).grade(memo)
    new = ReferenceGrader(room).grade(memo)
    assert old.recall == 1.0 and old.quoted_words == 0  # no 8 words verbatim: v2 read it as analysis
    assert new.recall == 0.0 and new.quoted_words > 40 and new.n_claims == 0


def test_near_copy_survives_fragments_reordering_case_and_punctuation(room):  # noqa: F811
    index = ReferenceGrader(room).index
    fragments = (
        "the Company undergoes a CHANGE of control. If so Bluefin Logistics may terminate. This Agreement "
        "on thirty days written notice. Without the prior consent of Bluefin Logistics in writing; And a change "
        "of control means ANY transaction. In which a person acquires over fifty percent, of the voting "
        "securities of the company. Whether by merger, purchase of stock or otherwise."
    )
    cut = strip_quotation(f"{PATH}: {fragments} Next step: obtain consent.", index)
    assert cut.text == "" or "terminat" not in normalize(cut.text), cut


def test_own_words_close_to_the_clause_are_not_a_copy(room):  # noqa: F811
    grader = ReferenceGrader(room)
    honest = (
        "Bluefin Logistics can terminate the MSA on 30 days' notice if Heron undergoes a change of control without "
        f"Bluefin's consent ({PATH}); the $1.2 million of annual fees is at risk. We recommend obtaining "
        "Bluefin's consent or a waiver before closing."
    )
    g = grader.grade(honest)
    assert g.headline == 1.0 and g.quoted_words == 0
    quoted = (
        GOOD
        + ' The clause: "Bluefin Logistics may terminate this Agreement upon thirty days\' written notice."'
    )
    assert grader.grade(quoted).headline == 1.0  # a short quotation in quotation marks stays allowed


def test_a_finding_only_inside_a_quotation_or_a_file_name_is_not_asserted(room):  # noqa: F811
    grader = ReferenceGrader(room)
    quoted_only = (
        f"Bluefin Logistics ({PATH}), clause 2: \"may terminate this Agreement upon thirty days' written notice if "
        "the Company undergoes a Change of Control\". Obtain Bluefin's consent or a waiver; $1,200,000 a year."
    )
    g = grader.grade(quoted_only)
    assert dict((v[0], v[1]) for v in g.verdicts)["I1-identify"] is False and g.n_claims == 0
    assert "terminat" not in normalize(
        own_text('See coc_terminate.txt and "may terminate on a change of control".')
    )
    assert "change of control" in normalize(
        own_text('A "Change of Control" lets Bluefin terminate.')
    )  # a term


# ---------------------------------------------------------------- citations, repeats
def test_a_finding_cited_to_the_wrong_document_is_a_false_claim(room):  # noqa: F811
    grader = ReferenceGrader(room)
    wrong = GOOD.replace(PATH, "05_financing/loan_harbor.txt")
    g = grader.grade(wrong)
    assert (
        g.n_claims >= 1 and g.n_false_claims == g.n_claims and g.precision == 0.0
    )  # naming Bluefin is not enough
    assert dict((v[0], v[1]) for v in g.verdicts)["I1-cite"] is False
    both = GOOD.replace(PATH, f"{PATH} and 05_financing/loan_harbor.txt")
    assert grader.grade(both).precision == 1.0  # half of the documents cited support it
    missing = GOOD.replace(PATH, "03_contracts/msa_bluefin_v2.txt")
    assert grader.grade(missing).precision == 0.0  # a document the room does not hold supports nothing


def test_repeated_units_are_padding_and_a_claim_counts_once(room):  # noqa: F811
    grader = ReferenceGrader(room)
    once = grader.grade(GOOD)
    edits = [
        ("Next step:", "Next step, again:"),
        (" annual", ""),
        ("Bluefin Logistics may", "Indeed, BLUEFIN may"),
    ]
    repeated = "\n\n".join([GOOD] + [GOOD.replace(a, b).replace("; t", ". T") for a, b in edits + edits[:2]])
    g = grader.grade(repeated)
    assert not g.cut and g.repeated_units == 5 and g.recall == once.recall
    assert g.n_false_claims >= 4 and g.headline < 0.4, g.headline  # one restatement is free, the rest pad
    restated = grader.grade(f"{GOOD}\n\n{GOOD.replace('Next step:', 'In short, next step:')}")
    assert restated.repeated_units == 1 and restated.headline == 1.0
    # a summary line and the finding in full are not repeats, and the same claim twice counts once
    summary = f"Summary: Bluefin Logistics may terminate the MSA on a change of control ({PATH}).\n\n{GOOD}"
    s = grader.grade(summary)
    assert s.repeated_units == 0 and s.headline == 1.0 and s.n_claims == once.n_claims
    # two findings on one document in the same template are two findings, not a repeat
    template = (
        f"{PATH} gives Bluefin Logistics a right to terminate on a change of control; review it before signing.\n\n"
        f"{PATH} gives Bluefin Logistics a right to consent on a change of control; review it before signing."
    )
    assert grader.grade(template).repeated_units == 0


def test_paraphrase_uses_other_words_than_the_oracle_and_the_room():
    rm = generate_room(f"para-{SEED}", SEED, n_documents=20)
    memo = adversarial.paraphrase_memo(rm, random.Random(SEED))
    g = ReferenceGrader(rm).grade(memo)
    assert g.headline >= BARS["paraphrase"][0] and g.recall == 1.0, (SEED, g.headline, g.false_claims)
    assert "Evidence:" not in memo and "The memo" not in memo
    # a rubric sentence that mirrors its clause may read as a near copy, but the memo is not a paste
    index = ReferenceGrader(rm).index
    near = [strip_quotation(u, index).near_copied for u in units(memo)]
    assert sum(near) <= 2 and sum(near) < len(near) / 3, (SEED, near)


def test_room_index_without_near_copies_is_the_exact_check():
    index = RoomIndex(["alpha beta gamma delta epsilon zeta eta theta iota kappa"], near_copies=False)
    assert not len(index.pair_keys) and index.near_copy(np.zeros(3, dtype=np.uint64), [(0, 3)]) == [0.0]
