"""The claim-kind table agrees with the generator's identify criteria, kind by kind."""

from pipeline.grading import claim_kinds
from pipeline.rooms.synthetic.generator import generate_room
from pipeline.rooms.synthetic.issues import DECOYS, ISSUES


def test_every_generated_identify_criterion_uses_its_claim_kind_signature():
    seen = set()
    for seed in range(30):
        for c in generate_room(f"k{seed}", seed, n_documents=60).criteria:
            if c.kind == "identify":
                assert c.any_of == claim_kinds.identify_signature(c.issue_kind), c.issue_kind
                seen.add(c.issue_kind)
    assert seen == set(ISSUES)  # every issue kind was checked


def test_every_issue_and_decoy_kind_maps_to_a_claim_kind():
    for kind in [*ISSUES, *DECOYS]:
        assert claim_kinds.generated_claim_kind(kind) in claim_kinds.GENERATED, kind


def test_every_generated_trap_uses_its_trap_signature():
    seen = set()
    for seed in range(30):
        for c in generate_room(f"k{seed}", seed, n_documents=60).criteria:
            if c.is_trap:
                assert c.any_of == claim_kinds.trap_signature(c.issue_kind), c.issue_kind
                seen.add(c.issue_kind)
    assert seen == set(DECOYS)  # every decoy kind was checked


def test_trap_signature_is_the_claim_kind_signature_unless_recorded_otherwise():
    for kind in DECOYS:
        expected = claim_kinds.GENERATED_TRAP.get(kind) or claim_kinds.identify_signature(kind)
        assert claim_kinds.trap_signature(kind) == expected
    assert claim_kinds.trap_signature("decoy_coc_deleted") == claim_kinds.identify_signature(
        "coc_termination"
    )
