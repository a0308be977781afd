"""The literal-stem prefilter of the extractive reader's risk patterns: what it reads, and that it is exact."""

from __future__ import annotations

import re

import pytest

from pipeline.llm.extractive import RISK_PATTERNS, split_sentences
from pipeline.llm.literal_stems import Prefiltered, literal_stems
from pipeline.rooms.synthetic.generator import generate_room


def test_stems_are_read_off_each_top_level_alternative():
    assert literal_stems(r"\bterminat\w*") == ("terminat",)
    assert literal_stems(r"most[\s-]+favou?red|no less favou?rable|\bMFN\b") == (
        "most",
        "no less favo",
        "mfn",
    )
    assert literal_stems(r"\bconsent (?:order|decree)\b|a\|b") == (
        "consent ",
        "a",
    )  # an escaped | is literal text
    assert literal_stems(r"\binvent(?!or(?:y|ies))\w*") == ("invent",)
    assert literal_stems(r"[ab]c|x") is None  # a class opens the first alternative: always searched
    assert literal_stems(r"\b(?:uncapped|unlimited)\b") is None  # no literal opens it: always searched
    assert literal_stems(r"colou?r") == ("colo",)  # the optional letter ends the stem
    assert literal_stems(r"x{2}y") is None  # a repeated first letter leaves nothing certain


def test_every_risk_pattern_has_a_prefilter():
    assert all(rx.stems for rx, _ in RISK_PATTERNS)


def _sentences() -> list[str]:
    room = generate_room("stems", seed=11, n_documents=12, tokens_per_document=3_000)
    sentences = [s for d in room.documents for s in split_sentences(d.text)]
    crafted = [
        "The Licensee may TERMINATE this Agreement upon a Change-of-Control of the Company.",
        "Non-Compete and NON SOLICIT covenants survive; liability is UNCAPPED and without any limit.",
        "The landlord's consent order (Consent Decree No. 4) and the side letter on rebates.",
        "An inventory of inventories, not an invention; the mfn clause and Best Price terms.",
        "Die Kündigung (termination) unter der Lizenz — licensing by the Lizenzgeber.",  # not ASCII
        "The ſettlement of the claim; a \u212aey-person clause.",  # case-folding exceptions: searched in full
        "Nothing here at all, just words about weather and lunch.",
    ]
    return sentences + crafted


def test_prefiltered_search_equals_the_plain_search():
    sentences = _sentences()
    hits = 0
    for rx, _ in RISK_PATTERNS:
        plain = re.compile(rx.regex.pattern, re.IGNORECASE)
        for s in sentences:
            got = rx.search(s, s.lower() if s.isascii() else None)
            assert got == (plain.search(s) is not None), (rx.regex.pattern, s)
            hits += got
    assert hits > 20  # the corpus exercises matches, not only misses


@pytest.mark.parametrize("text", ["The KEY-PERSON clause.", "a key person", "keyperson"])
def test_upper_case_ascii_text_is_matched_as_the_pattern_matches_it(text):
    rx = Prefiltered(r"\bkey[\s-]person\b")
    assert rx.search(text, text.lower()) == (
        re.search(r"\bkey[\s-]person\b", text, re.IGNORECASE) is not None
    )
