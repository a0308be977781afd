"""Extractive subagent (not an LLM): prompt parsing, risk sentences, bounds, context refusal."""

from __future__ import annotations

import asyncio

import pytest

from pipeline.config import BackendConfig
from pipeline.llm.base import ContextLimitError, GenerationParams, make_backend
from pipeline.llm.extractive import ExtractiveBackend, extract, parse_prompt, split_sentences

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


def prompt(*docs: tuple[str, str], instruction: str = "List the diligence risks in these documents.") -> str:
    return instruction + "\n\n" + "\n\n".join(f"=== {p} ===\n{t}" for p, t in docs)


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


def test_extracts_risk_sentences_with_paths_in_document_order():
    lines = extract(prompt(("a/msa.txt", MSA), ("b/lease.txt", LEASE), ("c/minutes.txt", BORING)))
    msa = [line for line in lines if line.startswith("[a/msa.txt] ")]
    assert any("Change of Control" in line for line in msa)
    assert any("unlimited and uncapped" in line for line in msa)
    assert any("most favored nation" in line for line in msa)
    assert not any("painted blue" in line or "quarterly" in line for line in lines)
    assert msa.index(next(x for x in msa if "Change of Control" in x)) < msa.index(
        next(x for x in msa if "most favored" in x)
    )
    lease = [line for line in lines if line.startswith("[b/lease.txt] ")]
    assert any("Landlord consent" in line for line in lease) and any("$2.4 million" in line for line in lease)
    assert lines[-1] == "No diligence issues found in c/minutes.txt."


def test_sentence_count_is_bounded_and_deterministic():
    many = " ".join(
        f"Clause {i}: the supplier shall indemnify the customer for all claims." for i in range(30)
    )
    p = prompt(("big/contract.txt", many))
    assert len(extract(p, max_sentences=8)) == 8
    assert extract(p) == extract(p)


def test_instruction_terms_select_sentences():
    doc = "The warehouse roof was replaced in 2021. The cafeteria opened in May."
    assert extract(prompt(("r/facility.txt", doc)))[0].startswith("No diligence issues")
    lines = extract(prompt(("r/facility.txt", doc), instruction="When was the warehouse roof replaced?"))
    assert lines == ["[r/facility.txt] The warehouse roof was replaced in 2021."]


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
    comp = asyncio.run(b.complete(msgs, GenerationParams(max_tokens=512)))
    assert comp.text.splitlines()[0].startswith("[a/msa.txt] ")
    assert "Be terse" not in comp.text  # the system prompt is not a document
    assert comp.prompt_tokens > 50 and comp.completion_tokens > 0 and comp.finish_reason == "stop"

    short = asyncio.run(b.complete(msgs, GenerationParams(max_tokens=30)))
    assert len(short.text.splitlines()) < len(comp.text.splitlines()) and short.finish_reason == "length"

    with pytest.raises(ContextLimitError, match="2000-token context"):
        asyncio.run(b.complete([{"role": "user", "content": MSA * 40}], GenerationParams()))
