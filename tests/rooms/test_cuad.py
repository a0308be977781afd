"""CUAD-based rooms, built from the shared corpus of real annotated contracts (skips without it)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from pipeline.rooms.cuad import EVIDENCE_SEP, _slug, build_cuad_rooms, contract_folder, locate, normalise
from pipeline.rooms.model import CATEGORIES
from pipeline.rooms.store import RoomError

pytestmark = pytest.mark.corpus


def corpus_dir() -> Path:
    env = os.environ.get("RLM_DATA_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "data"


@pytest.fixture(scope="module")
def corpus() -> Path:
    root = corpus_dir()
    if not (root / "cuad" / "master_clauses.csv").is_file():
        pytest.skip(f"shared legal corpus not found at {root} (set RLM_DATA_DIR to the folder holding cuad/)")
    return root


@pytest.fixture(scope="module")
def rooms(corpus: Path):
    return build_cuad_rooms(corpus, n_rooms=2, contracts_per_room=8, seed=5)


def test_rooms_have_the_deal_documents_and_contracts_filed_by_type(rooms):
    assert [r.name for r in rooms] == ["cuad-5-00", "cuad-5-01"]
    for room in rooms:
        assert room.source == "cuad" and room.seed == 5 and room.split in ("train", "heldout")
        paths = {d.path for d in room.documents}
        assert {"00_deal/merger_agreement.txt", "00_deal/nda.txt"} <= paths
        merger = room.doc("00_deal/merger_agreement.txt")
        assert "merger" in merger.text.lower() and merger.n_tokens > 10_000
        assert "confidential" in room.doc("00_deal/nda.txt").text.lower()
        contracts = [d for d in room.documents if not d.path.startswith("00_deal/")]
        assert len(contracts) == 8  # 8 // 20 == 0 distractors
        for d in contracts:
            top, sub, name = d.path.split("/")
            number, category = top.split("_", 1)
            assert category in CATEGORIES and int(number) == CATEGORIES.index(category) + 1
            assert d.category == category and name.endswith(".txt") and sub
        assert room.probes and {p.path for p in room.probes} == paths
        assert room.deal["sources"].startswith("Contracts: CUAD v1")
    a, b = ({d.path for d in r.documents if not d.path.startswith("00_deal/")} for r in rooms)
    assert not a & b  # rooms never share a contract


def test_contract_type_decides_the_folder():
    assert contract_folder("ACCURAYINC_09_01_2010-EX-10.31-DISTRIBUTOR AGREEMENT.txt") == (
        "material_contracts",
        "03_material_contracts/distribution",
    )
    assert (
        contract_folder("X_2019-EX-10.1-TRADEMARK LICENSE AGREEMENT.txt")[1]
        == "08_intellectual_property/licenses"
    )
    assert (
        contract_folder("X - Amendment #3 to Manufacturing Agreement .txt")[1]
        == "05_suppliers/supply_manufacturing"
    )
    assert contract_folder("X-EX-10.1-MYSTERY.txt")[1] == "03_material_contracts/other"
    assert (
        _slug("ACCURAYINC_09_01_2010-EX-10.31-DISTRIBUTOR AGREEMENT.txt")
        == "accurayinc_distributor_agreement"
    )


def test_identify_criteria_carry_expert_evidence_found_in_the_contract(rooms):
    for room in rooms:
        identify = [c for c in room.criteria if c.kind == "identify"]
        assert len(identify) >= 8
        for c in identify:
            assert not c.is_trap and len(c.paths) == 1 and c.any_of and c.any_of[0]
            text = room.doc(c.paths[0]).text
            assert c.evidence, c.criterion_id
            for piece in c.evidence.split(EVIDENCE_SEP):
                assert piece in text  # located spans are exact slices of the contract
                assert normalise(piece) in normalise(text)
        assert len({c.criterion_id for c in room.criteria}) == len(room.criteria)


def test_traps_sit_on_contracts_the_experts_labelled_no(rooms):
    traps = [c for r in rooms for c in r.criteria if c.is_trap]
    assert traps and all(c.kind == "trap" for c in traps)
    assert {c.issue_kind for c in traps} <= {"change_of_control", "uncapped_liability"}
    for room in rooms:
        ids = {c.criterion_id for c in room.criteria}
        for c in (c for c in room.criteria if c.is_trap):
            # a trap's category is never also an identify criterion on the same contract
            assert c.criterion_id.removesuffix(".trap") not in ids


def test_rooms_are_deterministic_and_stable_across_room_counts(corpus: Path, rooms):
    again = build_cuad_rooms(corpus, n_rooms=1, contracts_per_room=8, seed=5)[0]
    first = rooms[0]
    assert [d.path for d in again.documents] == [d.path for d in first.documents]
    assert again.criteria == first.criteria and again.probes == first.probes and again.target == first.target
    other = build_cuad_rooms(corpus, n_rooms=1, contracts_per_room=8, seed=6)[0]
    assert {d.path for d in other.documents} != {d.path for d in first.documents}


def test_bad_arguments_are_errors(corpus: Path, tmp_path: Path):
    with pytest.raises(RoomError, match="labelled contracts"):
        build_cuad_rooms(corpus, n_rooms=100, contracts_per_room=100)
    with pytest.raises(RoomError, match="contracts_per_room"):
        build_cuad_rooms(corpus, contracts_per_room=0)
    with pytest.raises(RoomError, match="master_clauses.csv"):
        build_cuad_rooms(tmp_path)


def test_locate_matches_after_normalising_quotes_whitespace_and_omissions():
    text = (
        "Neither party may  assign\nthis Agreement \u201cwithout\u201d consent. Other text. Void if assigned."
    )
    assert locate('assign this Agreement "without" consent', text) == [
        "assign\nthis Agreement \u201cwithout\u201d consent"
    ]
    assert locate("Neither party<omitted>Void if assigned.", text) == ["Neither party", "Void if assigned."]
    assert locate("not in the text", text) is None


def test_reference_judge_passes_a_memo_that_names_the_category_and_cites_the_path(rooms):
    if importlib.util.find_spec("pipeline.grading.criteria") is None:
        pytest.skip("pipeline.grading.criteria (the reference judge) is not written yet")
    from pipeline.grading.criteria import check_criterion

    def passed(result: tuple[bool, str]) -> bool:
        return result[0]

    room = rooms[0]
    c = next(c for c in room.criteria if c.kind == "identify")
    phrase = c.any_of[0][0]
    good = f"Key finding: {c.paths[0]} contains a {phrase} provision that needs attention."
    assert passed(check_criterion(c, good))
    assert not passed(
        check_criterion(c, f"Key finding: a {phrase} provision needs attention.")
    )  # no citation
    # A memo with one paragraph per expert finding passes every criterion, traps included:
    # the wording of one finding never flags a decoy on the same contract.
    for r in rooms:
        memo = "\n\n".join(
            f"{c.paths[0]}: {c.any_of[0][0]} provision found." for c in r.criteria if not c.is_trap
        )
        failed = [c.criterion_id for c in r.criteria if not passed(check_criterion(c, memo))]
        assert not failed
    trap = next(c for r in rooms for c in r.criteria if c.is_trap)
    assert passed(check_criterion(trap, "The contracts look ordinary."))
    assert not passed(check_criterion(trap, f"{trap.paths[0]} has a {trap.any_of[0][0]} clause."))


def test_cuad_room_round_trips_through_a_duckdb_file(rooms, tmp_path: Path):
    from pipeline import db
    from pipeline.rooms.store import load_room, save_room

    con = db.connect(tmp_path / "w.duckdb")
    save_room(con, rooms[1])
    back = load_room(con, rooms[1].name)
    con.close()
    assert back.source == "cuad" and back.split == rooms[1].split and back.deal == rooms[1].deal
    assert {d.path: d.text for d in back.documents} == {d.path: d.text for d in rooms[1].documents}
    assert sorted(back.criteria, key=lambda c: c.criterion_id) == sorted(
        rooms[1].criteria, key=lambda c: c.criterion_id
    )
