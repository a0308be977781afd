"""Synthetic room generator: determinism, structure, planted issues, scaling, probes, splits."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from pipeline import db
from pipeline.rooms.model import CATEGORIES, CRITERION_KINDS
from pipeline.rooms.probes import PROBE_CHARS
from pipeline.rooms.split import assign_splits, split_for
from pipeline.rooms.store import load_room, save_room
from pipeline.rooms.synthetic.criteria import TOTALS
from pipeline.rooms.synthetic.generator import generate_room
from pipeline.rooms.synthetic.issues import ISSUES

SMALL_SEEDS = [0, 1, 2, 3, 4]


@pytest.fixture(scope="module")
def small_rooms():
    return [generate_room(f"room-{s}", seed=s) for s in SMALL_SEEDS]


@pytest.fixture(scope="module")
def medium_room():
    return generate_room("room-m", seed=11, n_documents=200, tokens_per_document=400)


def test_same_arguments_give_the_same_room():
    a = generate_room("r", seed=5, n_documents=40)
    b = generate_room("r", seed=5, n_documents=40)
    assert [(d.path, d.text) for d in a.documents] == [(d.path, d.text) for d in b.documents]
    assert a.criteria == b.criteria
    assert a.probes == b.probes
    assert (a.target, a.deal) == (b.target, b.deal)
    c = generate_room("r", seed=6, n_documents=40)
    assert [d.text for d in c.documents] != [d.text for d in a.documents]


def test_room_shape(small_rooms, medium_room):
    for room in [*small_rooms, medium_room]:
        paths = [d.path for d in room.documents]
        assert len(paths) == len(set(paths))
        for d in room.documents:
            top = d.path.split("/", 1)[0]
            assert top == f"{CATEGORIES.index(d.category) + 1:02d}_{d.category}", d.path
            assert d.path.count("/") >= 1 and d.path.endswith(".txt")
        assert {"name", "industry", "jurisdiction", "hq"} <= set(room.target)
        assert {"type", "price", "buyer"} <= set(room.deal) and room.deal["price"] > 0
    assert [len(r.documents) for r in small_rooms] == [20] * len(small_rooms)
    assert len(medium_room.documents) == 200
    assert len(medium_room.folders) >= 40  # per-counterparty / per-year sub-folders
    assert len({d.category for d in medium_room.documents}) >= 14


def test_issue_kinds_and_criterion_kinds(small_rooms):
    kinds = {c.issue_kind for r in small_rooms for c in r.criteria if not c.is_trap}
    assert len(kinds) >= 12, kinds
    for room in small_rooms:
        present = {c.kind for c in room.criteria}
        # a room has a total only where two or more open issues of a family are quantified
        assert present | {"total"} == set(CRITERION_KINDS), (room.name, present)
        assert any(c.is_trap for c in room.criteria)
        n_issues = len({c.issue_id for c in room.criteria if not c.is_trap and c.kind != "total"})
        assert 6 <= n_issues <= 12
        ids = [c.criterion_id for c in room.criteria]
        assert len(ids) == len(set(ids))
        assert all(re.fullmatch(r"[ID]\d{2,3}-[a-z_]+\d*|T\d-total", i) for i in ids), ids


def test_every_issue_kind_is_generated():
    # a room with more issues than there are kinds (20 at 300 documents; 15 at 200, one kind short)
    room = generate_room("all-kinds", seed=11, n_documents=300, tokens_per_document=100)
    kinds = {c.issue_kind for c in room.criteria if not c.is_trap and c.kind != "total"}
    assert kinds == set(ISSUES)


def test_criteria_scale_with_room_size():
    big = generate_room("big", seed=3, n_documents=2000, tokens_per_document=60)
    assert len(big.documents) == 2000
    assert len(big.criteria) >= 300
    assert len({c.issue_id for c in big.criteria if not c.is_trap}) >= 80


def test_evidence_is_verbatim_and_paths_exist(small_rooms, medium_room):
    for room in [*small_rooms, medium_room]:
        texts = {d.path: d.text for d in room.documents}
        for c in room.criteria:
            assert c.text and c.evidence and c.evidence_paths, c.criterion_id
            assert all(p in texts for p in c.paths + c.evidence_paths), c.criterion_id
            # a total's evidence is the clauses of its parts, a conflict's its two figures, each in one of its
            # documents
            for piece in c.evidence.split(" | ") if c.kind in ("total", "conflict") else [c.evidence]:
                assert any(piece in texts[p] for p in c.evidence_paths), c.criterion_id


def test_issues_are_not_labelled_and_triggers_only_where_planted(medium_room):
    planted = {p for c in medium_room.criteria for p in c.evidence_paths}
    for d in medium_room.documents:
        assert not re.search(r"\b(RISK|ISSUE|RED FLAG|DECOY)\b", d.text), d.path
        if re.search(r"change (of|in) control", d.text, re.IGNORECASE):
            assert d.path in planted, d.path


def test_missing_assignment_is_detectable_only_by_absence(medium_room):
    absent = [
        c for c in medium_room.criteria if c.issue_kind == "missing_ip_assignment" and c.kind == "absence"
    ]
    assert absent
    piias = [d for d in medium_room.documents if "/invention_assignments/" in d.path]
    for c in absent:
        inventor = c.entities[0]
        assert not any(inventor in d.text for d in piias), inventor
        co_inventors = [p for p in c.evidence_paths if "/invention_assignments/" in p]
        assert len(co_inventors) == 2  # the other inventors did sign


def test_side_letter_is_referenced_but_missing(medium_room):
    """A missing side letter is only mentioned (in board minutes); a filed one (the decoy) is in the room."""
    filed = {c.entities[0] for c in medium_room.criteria if c.issue_kind == "decoy_side_letter_filed"}
    for c in medium_room.criteria:
        if c.issue_kind == "missing_side_letter" and c.kind == "absence":
            (party,) = c.entities
            assert party not in filed
            mentions = [
                d.path for d in medium_room.documents if f"side letter entered into with {party}" in d.text
            ]
            assert mentions == [p for p in c.evidence_paths if "board_minutes" in p]
            assert not any(
                "side letter" in d.title.lower() and party in d.title for d in medium_room.documents
            )
    for party in filed:
        assert any("side letter" in d.title.lower() and party in d.title for d in medium_room.documents)


def test_documents_average_the_requested_size():
    room = generate_room("sized", seed=2, n_documents=60, tokens_per_document=3000)
    avg = room.n_tokens / len(room.documents)
    assert 0.75 * 3000 <= avg <= 1.25 * 3000, avg


def test_most_documents_have_unique_sentence_probes(medium_room):
    with_span = {p.path for p in medium_room.probes if len(p.text) == PROBE_CHARS}
    assert len(with_span) >= 0.9 * len(medium_room.documents)
    per_doc = Counter(p.path for p in medium_room.probes)
    assert all(per_doc[d.path] >= 1 for d in medium_room.documents)


def test_save_and_load_round_trip(tmp_path, small_rooms):
    con = db.connect(tmp_path / "w.duckdb")
    room = small_rooms[0]
    save_room(con, room)
    back = load_room(con, room.name)
    assert [d.text for d in back.documents] == [d.text for d in room.documents]
    assert sorted(back.criteria, key=lambda c: c.criterion_id) == sorted(
        room.criteria, key=lambda c: c.criterion_id
    )
    assert back.seed == 0 and back.split == "train"


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="n_documents"):
        generate_room("x", seed=0, n_documents=0)
    with pytest.raises(ValueError, match="split"):
        generate_room("x", seed=0, split="test")


def test_split_rule_is_deterministic_and_matches_fraction():
    names = [f"room-{i:04d}" for i in range(2000)]
    splits = [split_for(n, 0.2) for n in names]
    assert splits == [split_for(n, 0.2) for n in names]
    share = splits.count("heldout") / len(names)
    assert 0.15 <= share <= 0.25
    assert all(split_for(n, 0.0) == "train" for n in names[:50])
    assert all(split_for(n, 1.0) == "heldout" for n in names[:50])
    with pytest.raises(ValueError, match="heldout_fraction"):
        split_for("x", 1.5)


def test_assign_splits_keeps_both_splits():
    for k in range(2, 8):
        names = [f"r{k}-{i}" for i in range(k)]
        for frac in (0.001, 0.5, 0.999):
            out = assign_splits(names, frac)
            assert set(out) == set(names)
            assert set(out.values()) == {"train", "heldout"}, (names, frac, out)
    assert assign_splits(["a", "b"], 0.0) == {"a": "train", "b": "train"}
    assert assign_splits(["only"], 0.5)["only"] == split_for("only", 0.5)
    # names that the rule already splits both ways are left as the rule says
    names = [f"room-{i:04d}" for i in range(100)]
    assert assign_splits(names, 0.3) == {n: split_for(n, 0.3) for n in names}


def test_probes_sit_at_their_offsets(small_rooms, medium_room):
    """A probe's char_offset points at its text in its document (line breaks counted once)."""
    from pipeline.rooms.probes import _anchored, sentence_keys

    for room in [*small_rooms, medium_room]:
        docs = {d.path: d.text for d in room.documents}
        for p in room.probes:
            if len(p.text) == PROBE_CHARS:  # sentence-anchored (tiny documents use their whole text)
                assert docs[p.path][p.char_offset :].startswith(p.text), (room.name, p)
    text = "First line of a long document that is here.\nSecond line, which is long enough to probe. Third"
    assert [k for _, k in _anchored(text)] == sentence_keys(text)
    assert all(text[o:].startswith(k) for o, k in _anchored(text))


@pytest.mark.parametrize("seed", range(6))
def test_totals_sum_the_open_quantified_issues_of_their_family(seed):
    room = generate_room(f"t-{seed}", seed, n_documents=300)
    for family, (_, kinds, _) in TOTALS.items():
        parts = [c for c in room.criteria if c.kind == "quantify" and c.issue_kind in kinds]
        totals = [c for c in room.criteria if c.kind == "total" and c.issue_kind == family]
        if len(parts) < 2:
            assert not totals, family
            continue
        (total,) = totals
        assert total.amounts[0].value == pytest.approx(sum(c.amounts[0].value for c in parts))
        assert set(total.evidence_paths) == {p for c in parts for p in c.evidence_paths}
        assert any("total" in g for g in total.any_of) and not total.entities
