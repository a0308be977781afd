"""What a memo can claim: claim kinds and the phrases that make a unit claim one.

A *claim kind* is a kind of finding a memo can assert about a document, for
example "this contract ends on a change of control". Each kind has a
signature: phrase groups in the rubric's ``any_of`` shape; a memo unit claims
the kind when it holds at least one phrase of every group (matched like the
reference judge matches phrases, pipeline.grading.criteria) and the statement is
not negated (pipeline.grading.memo_text).

Generated rooms use ``GENERATED``: one kind per distinct identify signature of
the synthetic issue builders (pipeline.rooms.synthetic.issues), plus
``coc_consent``, the claim the consent-waived decoy imitates. This table is the
one home of those phrases: the builders take their identify phrases from it
(``identify_signature``) and the decoys their trap phrases
(``trap_signature``); tests/grading/test_claim_kinds.py checks both. Issue
kinds whose identify criteria share a signature (a change-of-control
termination right, whether in the original agreement or added by an
amendment) are one claim kind. CUAD
rooms use the CUAD categories (pipeline.rooms.cuad.CATEGORIES_CUAD), each a
single group of its synonyms.
"""

from __future__ import annotations

COC = ["change of control", "change in control"]
# what says a document is not in the data room (the side letter's absence criterion, and the trap of a
# side letter that is filed)
NOT_IN_ROOM = [
    "missing", "not in the data room", "not included", "not provided", "absent", "not found", "no copy",
    "not located", "not been provided", "not produced", "not contained", "not in the room",
]  # fmt: skip

# claim kind -> phrase groups; the identify signature of the generator's issue kinds
GENERATED: dict[str, list[list[str]]] = {
    "coc_termination": [COC, ["terminat"]],
    "coc_consent": [COC, ["consent"]],
    "anti_assignment": [["assign"], ["consent", "operation of law", "merger", "null and void"]],
    "exclusivity_affiliates": [
        ["exclusiv", "non compet", "noncompet", "not compete", "restrictive covenant"],
        ["affiliate"],
    ],
    "mfn": [["most favored", "most favoured", "mfn", "no less favorable", "most favourable", "best price"]],
    "uncapped_indemnity": [
        ["indemn"],
        [
            "uncapped",
            "unlimited",
            "no cap",
            "not subject to any",
            "without limit",
            "not capped",
            "no limitation",
        ],
    ],
    "debt_coc_default": [COC, ["default", "prepay", "accelerat", "due and payable"]],
    "pending_litigation": [["lawsuit", "complaint", "litigation", "suit", "claim", "action"]],
    "exec_cic_payment": [COC, ["payment", "bonus", "severance", "single trigger", "accelerat", "vest"]],
    "missing_ip_assignment": [["assign", "piia"], ["patent", "invent"]],
    "lease_landlord_consent": [
        ["consent"],
        ["assign", "controlling interest", "change of control", "change in control", "transfer", "landlord"],
    ],
    "expired_permit": [["expired", "expiration", "lapsed", "without a valid permit"]],
    "unreported_breach": [
        ["breach", "unauthorized access", "security incident", "exfiltrat"],
        [
            "not notified",
            "no notice",
            "not been notified",
            "unreported",
            "not reported",
            "without notif",
            "no notification",
            "not disclosed",
            "failed to notify",
            "defer notification",
            "not been reported",
            "not given notice",
            "no notice has been",
        ],
    ],
    "missing_side_letter": [["side letter"]],
    # two documents state different fees for one contract: only a reader of both can say so
    "value_conflict": [
        ["discrepan", "inconsisten", "do not match", "does not match", "mismatch", "disagree", "differ"],
        ["fee"],
    ],
    "tax_assessment": [["assessment", "proposed adjustment", "deficiency", "audit", "examination"]],
}

# issue kind of the generator -> its claim kind (issue kinds not listed are their own claim kind)
GENERATED_ISSUE_KIND = {
    "amendment_coc": "coc_termination",
    "decoy_coc_deleted": "coc_termination",
    "decoy_consent_waived": "coc_consent",
    "decoy_debt_repaid": "debt_coc_default",
    "decoy_litigation_dismissed": "pending_litigation",
    "decoy_permit_renewed": "expired_permit",
    "decoy_side_letter_filed": "missing_side_letter",
    "decoy_fees_agree": "value_conflict",
}


# decoy kind -> its trap's phrase groups, where they differ from its claim kind's signature
# (the decoys were written with these; kept so generated rubrics stay as they were)
GENERATED_TRAP = {
    "decoy_consent_waived": [COC, ["consent", "terminat"]],
    "decoy_permit_renewed": [["expired", "lapsed", "expiration"]],
    # a side letter the minutes mention, filed in the room: only saying it is missing flags it
    "decoy_side_letter_filed": [["side letter"], NOT_IN_ROOM],
}


def generated_claim_kind(issue_kind: str) -> str:
    return GENERATED_ISSUE_KIND.get(issue_kind, issue_kind)


def identify_signature(issue_kind: str) -> list[list[str]]:
    """A fresh copy of the identify phrase groups for a generator issue kind."""
    return [list(g) for g in GENERATED[generated_claim_kind(issue_kind)]]


def trap_signature(decoy_kind: str) -> list[list[str]]:
    """A fresh copy of the phrase groups a generator decoy's trap looks for in a memo.

    A trap fails a memo that claims the decoy's apparent issue: its phrases are
    those of the claim kind the decoy imitates, except where ``GENERATED_TRAP``
    records its own.
    """
    groups = GENERATED_TRAP.get(decoy_kind) or GENERATED[generated_claim_kind(decoy_kind)]
    return [list(g) for g in groups]


def cuad_kinds() -> dict[str, list[list[str]]]:
    """CUAD category slug -> one phrase group of its synonyms."""
    from pipeline.rooms.cuad import CATEGORIES_CUAD

    return {c.slug: [list(c.synonyms)] for c in CATEGORIES_CUAD}
