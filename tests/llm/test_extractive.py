"""Extractive subagent (not an LLM): prompt parsing, structured findings, bounds, context refusal."""

from __future__ import annotations

import asyncio
import json

import pytest

from pipeline.config import BackendConfig
from pipeline.grading.claim_kinds import GENERATED, generated_claim_kind
from pipeline.grading.criteria import grade_memo, parse_amounts
from pipeline.llm.base import ContextLimitError, GenerationParams, make_backend
from pipeline.llm.extractive import (
    QUOTE_WORDS,
    ExtractiveBackend,
    claimed_kinds,
    extract,
    kind_of,
    parse_prompt,
    split_sentences,
)
from pipeline.llm.extractive_parties import parties
from pipeline.llm.reader_vocabulary import RISK
from pipeline.rooms.model import count_tokens
from pipeline.rooms.synthetic.generator import generate_room

MSA = """MASTER SERVICES AGREEMENT

This Agreement is made between Acme Corp and Target Inc. The parties meet quarterly.
Either party may terminate this Agreement upon a Change of Control of the other party without its prior written consent.
The office is painted blue. Fees are invoiced monthly.
Supplier's liability for data breaches shall be unlimited and uncapped.
Customer shall receive most favored nation pricing on all renewals."""

LEASE = """LEASE
The premises are at 1 Main Street. The Tenant may not assign this Lease without Landlord consent.
Annual rent is $2.4 million, payable in advance."""

BORING = """MINUTES
The meeting started at 9am. Coffee was served. The meeting ended at 10am."""

KEYS = ["kind", "issue", "path", "parties", "amounts", "dates", "refers_to", "quote", "key"]


def prompt(*docs: tuple[str, str], instruction: str = "List the diligence risks in these documents.") -> str:
    return instruction + "\n\n" + "\n\n".join(f"=== {p} ===\n{t}" for p, t in docs)


def findings(lines: list[str]) -> list[dict]:
    return [json.loads(line) for line in lines if line.startswith("{")]


def paragraph(f: dict) -> str:
    """The finding as one memo line written from its facts (what the ladder's `everything` rung writes)."""
    return f"{f['issue']} ({', '.join(f['parties'] + f['amounts'])}), {f['path']}."


def test_parse_prompt_headers():
    instr, blocks = parse_prompt(prompt(("a/msa.txt", MSA), ("b/lease.txt", LEASE)))
    assert instr.startswith("List the diligence risks")
    assert [b.path for b in blocks] == ["a/msa.txt", "b/lease.txt"]
    assert "Landlord consent" in blocks[1].text and "Landlord" not in blocks[0].text

    _, blocks = parse_prompt(f"Review.\nDocument: x/one.txt\n{LEASE}\nPath: y/two.txt\n{BORING}")
    assert [b.path for b in blocks] == ["x/one.txt", "y/two.txt"]

    # No header: the first path-like token names the document.
    _, blocks = parse_prompt(f"Find risks in 07_real_estate/lease_main.txt:\n{LEASE}")
    assert [b.path for b in blocks] == ["07_real_estate/lease_main.txt"]
    _, blocks = parse_prompt(LEASE)
    assert [b.path for b in blocks] == ["prompt"]


def test_structured_findings_per_document_in_order():
    lines = extract(prompt(("a/msa.txt", MSA), ("b/lease.txt", LEASE), ("c/minutes.txt", BORING)))
    assert lines[-1] == "No diligence issues found in c/minutes.txt."
    found = findings(lines)
    assert len(found) == len(lines) - 1  # every other line is one whole JSON object
    assert all(list(f) == KEYS for f in found)
    msa = [f for f in found if f["path"] == "a/msa.txt"]
    # one finding per risk, by kind, in document order; the painted office is no risk
    assert [f["kind"] for f in msa] == ["coc_termination", "uncapped_liability", "mfn"]
    assert not any("painted" in f["quote"] or "quarterly" in f["quote"] for f in found)
    coc = msa[0]
    assert coc["issue"] == RISK["coc_termination"].label  # the reader's own words
    assert coc["quote"].startswith("Either party may terminate this Agreement upon a Change of Control")
    (lease,) = [f for f in found if f["path"] == "b/lease.txt"]
    assert lease["kind"] == "lease_landlord_consent"
    assert lease["amounts"] == ["$2.4 million"]  # the rent the clause puts at risk, from the next sentence
    assert lease["parties"] == []  # "Tenant", "Lease" and "Landlord" are defined terms, not parties
    # facts only: no verdict, summary or recommendation (the memo is the root's to write)
    assert not {"summary", "next_step", "note"} & set(lease)


def test_planted_issues_of_generated_rooms_are_found_with_their_entities():
    """Every planted issue kind: the right kind, its criterion entities, its amount, a short quote, and
    a line written from the finding's facts passes the issue's identify, cite and quantify, except where
    the issue is what one document cannot show (an inventor who never assigned): there it passes nothing,
    and no next step passes (recommendations are the root's to write)."""
    room = generate_room("extractive-test", seed=0, n_documents=200, tokens_per_document=200)
    docs = {d.path: d for d in room.documents}
    issue_kinds = set()
    steps: dict[str, bool] = {}
    for c in room.criteria:
        if c.kind != "identify" or c.is_trap:
            continue
        issue_kinds.add(c.issue_kind)
        path = c.evidence_paths[0]
        found = findings(extract(prompt((path, docs[path].text))))
        kind = generated_claim_kind(c.issue_kind)
        if kind == "value_conflict":
            # two documents' fees differ: neither shows it, and unasked the reader reports no fees (a fee is
            # no risk); tests/grading/test_conflict.py asks for them
            assert not found, found
            continue
        hits = [f for f in found if f["kind"] == kind]
        assert len(hits) == 1, (c.issue_kind, found)
        f = hits[0]
        assert f["path"] == path
        assert set(c.entities) <= set(f["parties"]), (c.issue_kind, f["parties"])
        assert room.target["name"] not in f["parties"] and room.target["short_name"] not in f["parties"]
        assert not {"Company", "Agreement", "Change of Control"} & set(f["parties"])
        assert 0 < len(f["quote"].replace("...", " ").split()) <= QUOTE_WORDS
        assert f["quote"].replace("...", "").split()[0] in " ".join(docs[path].text.split())
        # claims no kind but its own (a patent's inventor list none: only the room shows who assigned)
        assert claimed_kinds(paragraph(f)) <= {kind}, (c.issue_kind, paragraph(f))
        crits = [
            x for x in room.criteria if x.issue_id == c.issue_id and x.kind not in ("connect", "absence")
        ]
        for x in crits:
            if x.kind == "quantify":
                assert any(
                    abs(v - a.value) <= a.value * a.tolerance
                    for a in x.amounts
                    for v in parse_amounts(" ".join(f["amounts"]))
                ), (c.issue_kind, f["amounts"])
        for cid, ok, why in grade_memo(crits, paragraph(f)):
            if cid.endswith("next_step") or (
                c.issue_kind == "missing_ip_assignment" and cid.endswith("identify")
            ):
                steps[cid] = ok
            elif c.issue_kind == "missing_ip_assignment":
                continue  # its citation may pass: the patent does name the inventor
            else:
                assert ok, (c.issue_kind, cid, why)
    assert len(issue_kinds) == 15  # the room holds every kind the generator plants
    assert not any(steps.values()), steps


def test_the_reader_asserts_nothing_about_the_rest_of_the_room():
    """A board minute that mentions a side letter gives a fact ("side letter" in refers_to), never a claim
    that the letter is missing: absence is a fact about the whole room, which only the root can check."""
    room = generate_room("extractive-absence", seed=0, n_documents=200, tokens_per_document=200)
    docs = {d.path: d for d in room.documents}
    absent = [c for c in room.criteria if c.kind == "absence"]
    assert {c.issue_kind for c in absent} >= {"missing_side_letter", "missing_ip_assignment"}
    for c in absent:
        for path in c.evidence_paths:
            # what the reader says in its own words: the labels (kind and key are identifiers)
            labels = " ".join(f["issue"] for f in findings(extract(prompt((path, docs[path].text))))).lower()
            for phrase in (
                "not in the data room",
                "missing",
                "not provided",
                "no copy",
                "never signed",
                "outside",
            ):
                assert phrase not in labels, (path, phrase, labels)
    minutes = [c.evidence_paths[0] for c in absent if c.issue_kind == "missing_side_letter"]
    for path in minutes:
        (f,) = [
            f
            for f in findings(extract(prompt((path, docs[path].text))))
            if f["kind"] == "missing_side_letter"
        ]
        assert "side letter" in f["refers_to"]


def test_resolved_issues_come_back_as_resolved_lines_with_the_same_key():
    """Each decoy: the clause reads as an open finding, the document that resolves it (amendment, waiver,
    payoff letter, dismissal, renewal) as a "Resolved: <key>" line with the same key (kind / party)."""
    room = generate_room(
        "extractive-decoys", seed=4, n_documents=300, tokens_per_document=200
    )  # 3 that resolve
    docs = {d.path: d for d in room.documents}
    # a filed side letter resolves nothing a document says: only a claim that it is missing (the root's);
    # fees that agree, only a claim that they differ
    traps = [
        c
        for c in room.criteria
        if c.is_trap and c.issue_kind not in ("decoy_side_letter_filed", "decoy_fees_agree")
    ]
    assert len({c.issue_kind for c in traps}) >= 3
    for c in traps:
        (entity,) = c.entities
        original, resolving = c.evidence_paths[0], c.evidence_paths[-1]
        assert kind_of(c.evidence) is None, c.evidence
        flagged = findings(extract(prompt((original, docs[original].text))))
        assert len(flagged) == 1 and entity in flagged[0]["parties"], flagged
        assert flagged[0]["key"] == f"{flagged[0]['kind']} / {entity}"
        lines = extract(prompt((resolving, docs[resolving].text)))
        assert not [f for f in findings(lines) if f["kind"] == flagged[0]["kind"]], lines
        assert [x for x in lines if x.startswith(f"Resolved: {flagged[0]['key']} ({resolving}): ")], lines
    # a planted issue's clause is never read as resolved
    planted = {p for c in room.criteria if not c.is_trap for p in c.evidence_paths}
    assert not [
        x for x in extract(prompt(*[(p, docs[p].text) for p in sorted(planted)])) if x.startswith("Resolved")
    ]


def test_parties():
    assert parties(
        "Based on the examination, the New York State Department of Taxation and Finance proposes an assessment."
    ) == ["New York State Department of Taxation and Finance"]
    assert parties(
        "Inventors: Ivan Okafor, Uma Takahashi and Milan Sullivan, each of whom was employed."
    ) == [
        "Ivan Okafor",
        "Uma Takahashi",
        "Milan Sullivan",
    ]
    assert parties(
        "Our records indicate that Permit No. SW-36612 issued to the Company's facility expired."
    ) == ["SW-36612"]
    # legal suffixes dropped, titles and defined terms are not parties, the target company is excluded
    assert parties(
        'This Exclusive Distribution Agreement is between Heron Robotics Ltd and Bluestone Logistics LLC ("Distributor").',
        exclude=("Heron Robotics Ltd",),
    ) == ["Bluestone Logistics"]
    assert parties("Plaintiff Bluestone Logistics claims that the Company breached the Agreement.") == [
        "Bluestone Logistics"
    ]


def test_kinds_follow_the_signatures():
    # the reader knows every kind of risk the generator plants, but the fees two documents state differently:
    # that is a comparison across documents, which a reader of one cannot make
    assert set(GENERATED) - set(RISK) == {"value_conflict"}
    # a change-of-control default also "terminates"; the more specific kind wins
    assert (
        kind_of("Upon a change of control, the Lender may declare all loans due and payable.")
        == "debt_coc_default"
    )
    # everyday contract wording is no litigation or tax finding
    assert (
        kind_of("The prevailing party in any action to enforce this Agreement may recover legal fees.")
        is None
    )
    assert kind_of("An audit notice of ten Business Days is required, and the audit was completed.") is None
    # CUAD categories when no generated kind matches
    assert (
        kind_of("Licensee may terminate for convenience on ninety days' notice.")
        == "termination_for_convenience"
    )


def test_findings_are_bounded_best_first_and_deterministic():
    text = "\n\n".join(
        [
            "The parties meet quarterly to review the service levels agreed in this document.",
            "Acme Corp may terminate this Agreement if the Company undergoes a change of control.",
            "Customer shall receive most favored nation pricing on all renewals of the order forms.",
            "The Company's obligation to indemnify Acme Corp is unlimited and uncapped in every respect.",
            "Any breach of the covenant in this section may cause damage to the receiving party.",
        ]
    )
    p = prompt(("big/contract.txt", text))
    assert [f["kind"] for f in findings(extract(p))] == ["coc_termination", "mfn", "uncapped_indemnity"]
    # the best two by risk score, back in document order
    assert [f["kind"] for f in findings(extract(p, max_sentences=2))] == [
        "coc_termination",
        "uncapped_indemnity",
    ]
    assert extract(p) == extract(p)
    # within a token budget: the best finding first, even when it comes last
    two = prompt(
        ("x/c.txt", "\n\n".join(text.split("\n\n")[2:0:-1]))
    )  # the MFN clause, then the change of control
    assert [f["kind"] for f in findings(extract(two))] == ["mfn", "coc_termination"]
    assert [f["kind"] for f in findings(extract(two, max_tokens=1))] == ["coc_termination"]


def test_instruction_terms_select_sentences():
    doc = "The warehouse roof was replaced in 2021. The cafeteria opened in May."
    assert extract(prompt(("r/facility.txt", doc)))[0].startswith("No diligence issues")
    found = findings(
        extract(prompt(("r/facility.txt", doc), instruction="When was the warehouse roof replaced?"))
    )
    assert [(f["kind"], f["quote"]) for f in found] == [("other", "The warehouse roof was replaced in 2021.")]


def test_split_sentences_keeps_amounts_and_sections_whole():
    s = split_sentences(
        "Payment of $1.5 million is due under Section 4.2 of the Agreement. Next sentence here."
    )
    assert s == ["Payment of $1.5 million is due under Section 4.2 of the Agreement.", "Next sentence here."]


def test_backend_usage_limits_and_refusal():
    b = make_backend(BackendConfig(kind="extractive", context_tokens=2000))
    assert isinstance(b, ExtractiveBackend) and b.name == "extractive"
    msgs = [{"role": "system", "content": "Be terse. Terminate all exclusive deals."},
            {"role": "user", "content": prompt(("a/msa.txt", MSA))}]  # fmt: skip
    comp = asyncio.run(b.complete(msgs, GenerationParams(max_tokens=2048)))
    found = [json.loads(line) for line in comp.text.splitlines()]
    assert [f["path"] for f in found] == ["a/msa.txt"] * 3
    assert "Be terse" not in comp.text  # the system prompt is not a document
    assert comp.prompt_tokens > 50 and comp.completion_tokens > 0 and comp.finish_reason == "stop"

    # Over max_tokens: the best findings that fit, whole lines, in document order.
    budget = sum(count_tokens(json.dumps(f, ensure_ascii=False) + "\n") for f in found if f["kind"] != "mfn")
    short = asyncio.run(b.complete(msgs, GenerationParams(max_tokens=budget)))
    assert short.finish_reason == "length"
    assert [json.loads(line)["kind"] for line in short.text.splitlines()] == [
        "coc_termination",
        "uncapped_liability",
    ]
    one = asyncio.run(b.complete(msgs, GenerationParams(max_tokens=10)))  # at least one line, the best
    assert [json.loads(line)["kind"] for line in one.text.splitlines()] == ["coc_termination"]

    with pytest.raises(ContextLimitError, match="2000-token context"):
        asyncio.run(b.complete([{"role": "user", "content": MSA * 40}], GenerationParams()))


def test_a_document_read_again_with_the_same_request_gives_the_same_findings_from_memory():
    from pipeline.llm.extractive import Block, _cached_findings, block_findings, instruction_terms

    prompt = f"Find change-of-control and liability terms.\n\n=== a/msa.txt ===\n{MSA}\n\n=== b/lease.txt ===\n{LEASE}"
    _cached_findings.cache_clear()
    first = extract(prompt)
    assert _cached_findings.cache_info().misses == 2 and _cached_findings.cache_info().hits == 0
    assert extract(prompt) == first  # the second reading comes from memory ...
    assert _cached_findings.cache_info().hits == 2
    # ... and is what the reader computes afresh
    instruction, blocks = parse_prompt(prompt)
    terms = instruction_terms(instruction)
    msa = blocks[0]
    assert [f.line() for f in block_findings(Block(msa.path, msa.text), terms, (), 8)] == [
        f.line() for f in _cached_findings(msa.path, msa.text, frozenset(terms), (), 8)
    ]
    assert _cached_findings.cache_info().misses == 2  # the parsed block is the one remembered
    # another request on the same documents is another reading
    extract(prompt.replace("Find change-of-control and liability terms.", "Find the rent."))
    assert _cached_findings.cache_info().misses == 4
