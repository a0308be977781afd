"""The reference judge measured with known-answer memos, and its reading rules one by one."""

import pytest

from pipeline.grading import claim_kinds
from pipeline.grading.criteria import normalize
from pipeline.grading.known_answers import ADVERSARIAL, BARS, check_room, evidence_memo, expert_label_memo
from pipeline.grading.memo_text import RoomIndex, claims_signature, cut_to_budget, strip_quotation
from pipeline.grading.reference import ReferenceGrader, default_budget, headline
from pipeline.rooms.model import Amount, Criterion, Document, Room
from pipeline.rooms.synthetic.generator import generate_room
from tests.rooms.test_cuad import corpus_dir

CORPUS = corpus_dir()  # ../shared/data beside the project, or RLM_DATA_DIR


def _assert_bars(rows: list[dict]) -> None:
    bad = [(r["room"], r["memo"], r["headline"], r["bar"], r["seed"]) for r in rows if not r["ok"]]
    assert not bad, bad
    assert {r["memo"] for r in rows} >= {"empty", "oracle", "dump", "dump_phrases", "claim_all", *ADVERSARIAL}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_known_answer_bars_on_generated_rooms_of_20_documents(seed):
    room = generate_room(f"ka-{seed}", seed, n_documents=20)
    rows = check_room(room)
    _assert_bars(rows)
    by = {r["memo"]: r for r in rows}
    # the degenerate memos fail for the reasons the grader is built on
    assert by["claim_all"]["false_claims"] > 10 and by["claim_all"]["precision"] < 0.1  # precision sinks it
    assert by["dump_phrases"]["recall"] == 0  # the pasted room, risk list and all, is read as a paste
    assert by["oracle"]["false_claims"] == 0 and by["oracle"]["claims"] > 0


def test_known_answer_bars_on_a_generated_room_of_500_documents():
    room = generate_room("ka-500", 7, n_documents=500, tokens_per_document=300)
    rows = check_room(room)
    _assert_bars(rows)
    assert {r["cut"] for r in rows if r["memo"] in ("dump", "claim_all")} == {True}


@pytest.mark.skipif(not (CORPUS / "cuad").is_dir(), reason="the shared CUAD corpus is not beside the project")
def test_known_answer_bars_on_cuad_rooms_with_the_expert_label_memo():
    from pipeline.rooms.cuad import build_cuad_rooms

    rooms = build_cuad_rooms(CORPUS, n_rooms=2, contracts_per_room=30, seed=0)
    for room in rooms:
        rows = check_room(room, CORPUS)
        _assert_bars(rows)
        by = {r["memo"]: r for r in rows}
        assert by["expert_labels"]["headline"] >= BARS["expert_labels"][0]
        # a claim-everything memo finds most labelled provisions, and precision above chance is ~0
        assert by["claim_all"]["recall"] > 0.5 and by["claim_all"]["precision"] < 0.1


@pytest.mark.skipif(not (CORPUS / "cuad").is_dir(), reason="the shared CUAD corpus is not beside the project")
def test_a_claim_of_a_category_labelled_no_is_false():
    from pipeline.rooms.cuad import build_cuad_rooms

    room = build_cuad_rooms(CORPUS, n_rooms=1, contracts_per_room=20, seed=0)[0]
    path, labels = next(
        (p, ls) for p, ls in room.claim_labels.items() if ls.get("most_favored_nation") is False
    )
    g = ReferenceGrader(room)
    memo = expert_label_memo(room, CORPUS)
    wrong = memo + f"\n\n{path} contains most-favored-nation pricing terms.\n"
    before, after = g.grade(memo), g.grade(wrong)
    assert after.n_false_claims == before.n_false_claims + 1
    assert after.precision < before.precision and after.recall == before.recall


# ---------------------------------------------------------------- the rules, one by one
@pytest.fixture(scope="module")
def room() -> Room:
    clause = (
        "Bluefin Logistics may terminate this Agreement upon thirty days' written notice if the Company undergoes "
        "a Change of Control without the prior written consent of Bluefin Logistics, and for this purpose a "
        "Change of Control means any transaction in which any person acquires more than fifty percent of the "
        "voting securities of the Company, whether by merger, stock purchase or otherwise."
    )
    docs = [
        Document(
            "03_contracts/msa_bluefin.txt",
            "material_contracts",
            "MSA",
            f"Fees are $1,200,000 a year. {clause}",
        ),
        Document(
            "05_financing/loan_harbor.txt", "financing", "Loan", "Harbor Bank lends $6,500,000 until 2029."
        ),
        Document("01_corporate/charter.txt", "corporate", "Charter", "The Company was formed in Delaware."),
    ]
    p = docs[0].path
    crit = [
        Criterion("I1-identify", "identify", "t", "I1", "coc_termination", entities=["Bluefin Logistics"],
                  any_of=claim_kinds.identify_signature("coc_termination"), evidence=clause, evidence_paths=[p]),
        Criterion("I1-cite", "cite", "t", "I1", "coc_termination", entities=["Bluefin Logistics"], paths=[p]),
        Criterion("I1-quantify", "quantify", "t", "I1", "coc_termination", entities=["Bluefin Logistics"],
                  amounts=[Amount(1_200_000, 0.02)]),
        Criterion("I1-next_step", "next_step", "t", "I1", "coc_termination", entities=["Bluefin Logistics"],
                  any_of=[["obtain", "seek"], ["consent", "waiver"]]),
    ]  # fmt: skip
    return Room("r", {"name": "Heron"}, {"type": "merger"}, docs, crit, source="generated")


GOOD = (
    "Bluefin Logistics may end the master services agreement if Heron undergoes a change of control; termination "
    "puts $1.2 million of annual fees at risk (03_contracts/msa_bluefin.txt). Next step: obtain Bluefin's consent "
    "or a waiver before closing."
)


def test_a_concise_finding_passes_everything(room):
    g = ReferenceGrader(room).grade(GOOD)
    assert [v[1] for v in g.verdicts] == [True, True, True, True]
    assert g.recall == 1.0 and g.precision == 1.0 and g.headline == 1.0 and g.n_claims >= 1


def test_negated_finding_neither_passes_nor_claims(room):
    memo = "No change-of-control termination right was found in 03_contracts/msa_bluefin.txt for Bluefin Logistics."
    g = ReferenceGrader(room).grade(memo)
    assert dict((v[0], v[1]) for v in g.verdicts)["I1-identify"] is False
    assert g.n_claims == 0
    for text, claimed in [
        ("No change-of-control clause was found in X.", False),
        ("X does not contain any change of control termination right.", False),
        ("A change of control termination right was not found in X.", False),
        ("X may terminate on a change of control.", True),
        ("There is no cap on the indemnity to X.", True),  # "no cap" is the finding, not a negation
    ]:
        kind = "uncapped_indemnity" if "cap" in text else "coc_termination"
        assert claims_signature(normalize(text), claim_kinds.GENERATED[kind]) is claimed, text


def test_citation_and_next_step_count_only_beside_the_finding(room):
    listing = "03_contracts/msa_bluefin.txt - Bluefin Logistics. Obtain consent or waiver. $1,200,000."
    g = ReferenceGrader(room).grade(listing)
    assert not any(v[1] for v in g.verdicts), g.verdicts


def test_copied_text_earns_nothing_but_a_short_marked_quote_is_allowed(room):
    grader = ReferenceGrader(room)
    pasted = f"03_contracts/msa_bluefin.txt: {room.documents[0].text} Next step: obtain consent or waiver."
    g = grader.grade(pasted)
    assert g.recall == 0 and g.quoted_words > 40
    quoted = (
        GOOD
        + ' The clause reads: "Bluefin Logistics may terminate this Agreement upon thirty days\' written notice."'
    )
    g2 = grader.grade(quoted)
    assert g2.headline == 1.0 and g2.quoted_words == 0


def test_strip_quotation_cuts_long_runs_and_drops_mostly_copied_units():
    source = " ".join(f"word{i}" for i in range(200))
    index = RoomIndex([source])
    long_run = " ".join(f"word{i}" for i in range(10, 70))  # 60 copied words
    cut = strip_quotation(
        f"Our own analysis of the matter follows here in plain words. {long_run} " + "ours " * 60, index
    )
    assert cut.quoted_words == 60 and "word30" not in cut.text and "[...]" in cut.text
    short = " ".join(f"word{i}" for i in range(10, 30))  # 20 copied words, unmarked, in a short unit
    assert strip_quotation(f"We note {short}.", index).text == ""
    assert strip_quotation(
        f'We note "{short}" in the memo text, with our own view of what it means.', index
    ).text


def test_reading_budget_cuts_and_is_recorded(room):
    text, n, cut = cut_to_budget("one two  three\nfour five", 3)
    assert (text, n, cut) == ("one two  three", 5, True)
    assert cut_to_budget("a b", 3) == ("a b", 2, False)
    assert default_budget(room) == 150 + 100 * 1
    g = ReferenceGrader(room, budget_words=10).grade(GOOD)
    assert g.cut and g.budget_words == 10 and g.memo_words == len(GOOD.split()) and g.recall < 1.0


def test_a_false_claim_costs_precision(room):
    grader = ReferenceGrader(room)
    false = (
        GOOD
        + "\n\n05_financing/loan_harbor.txt: Harbor Bank may accelerate the loan and declare a default on a change of control."
    )
    g = grader.grade(false)
    # a default on a change of control also reads as an accelerated change-in-control payment: two false kinds
    assert g.recall == 1.0 and g.n_false_claims == 2 and 0 < g.precision < 1
    assert {c.split(" @ ")[0] for c in g.false_claims} == {"debt_coc_default", "exec_cic_payment"}
    assert g.headline == pytest.approx(headline(g.recall, g.precision))
    generic = GOOD + "\n\nChange of control may trigger default and acceleration under financing documents."
    assert grader.grade(generic).n_false_claims == 2  # a claim that cites nothing is not supported


def test_oracle_memo_of_a_generated_room_is_concise_and_within_budget():
    room = generate_room("budget", 3, n_documents=20)
    g = ReferenceGrader(room).grade(evidence_memo(room))
    assert not g.cut and g.headline == 1.0 and g.memo_words < g.budget_words


def test_grader_check_command_prints_the_table_and_gates(tmp_path, capsys, monkeypatch):
    from pipeline.cli import main
    from pipeline.grading import known_answers

    run = [f"run.dir={tmp_path}", "rooms.n_rooms=2"]
    assert main(["--recipe", "tiny", "rooms", "generate", *run]) == 0
    capsys.readouterr()
    assert main(["--recipe", "tiny", "grader-check", *run]) == 0
    out, err = capsys.readouterr()
    assert "claim_all" in out and "dump_phrases" in out and "oracle" in out
    assert "24 of 24 known-answer rows within their bars" in err  # 2 rooms x 12 memos
    assert "claim_absence" in out and "claim_conflict" in out
    assert "near_copy" in out and "paraphrase" in out
    # a bar the oracle cannot meet fails the command, naming the row
    monkeypatch.setitem(known_answers.BARS, "oracle", (1.01, 1.02))
    assert main(["--recipe", "tiny", "grader-check", *run]) == 1
    assert "FAIL" in capsys.readouterr().err
    # no warehouse: one line, exit 1
    assert main(["--recipe", "tiny", "grader-check", f"run.dir={tmp_path / 'none'}"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no warehouse at")
