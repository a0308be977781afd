"""Extractive subagent: a deterministic keyword reader. It is NOT an LLM.

It stands in for a subagent model so the whole pipeline runs on a CPU in
minutes: given a prompt holding one or more documents, it finds the sentences
that state a diligence risk and reports each as a structured finding, written
the way a reviewer would note it (its own summary and next step, the parties
and amounts, a short quotation), never as a pasted paragraph. Same prompt,
same answer.

Prompt convention (the root's prompts are free text, so parsing is lenient):

- A document starts with a line ``=== <path> ===``; a line ``Document: <path>``
  or ``Path: <path>`` also starts one. Its text runs to the next such line.
- Text before the first document is the instruction. Longer words of the
  instruction (e.g. "indemnification", "landlord") also select sentences; a
  line ``Target: <name>`` there names the target company (never a party).
- With no such line, the whole prompt is one document, named by the first
  path-like token in it (``folder/file.ext``) or ``prompt``.

Which sentences: a sentence is a finding when it scores as risky (weighted
risk patterns, ``RISK_PATTERNS``) and matches a *claim kind*: the generated
rooms' kinds (pipeline.grading.claim_kinds.GENERATED, tried in ``KIND_ORDER``,
some narrowed by a context pattern in ``KIND_CONTEXT`` so that boilerplate
such as "any action to enforce this Agreement" is not litigation) or, failing
those, a CUAD category (``cuad_kinds()``). A sentence matches a kind when it
holds one phrase of every phrase group of the kind's signature, matched as
the reference judge matches phrases (pipeline.grading.criteria: ``normalize()``,
then the phrase at a word start). One exception: an inventor listing on a
patent ("Inventors: A, B and C") is a ``missing_ip_assignment`` finding
although it names no assignment, because what a reviewer must check there is
that every inventor assigned. Risky sentences of no kind are dropped, unless
words of the instruction selected them: those come back as kind ``other``.

A sentence that reports an issue resolved (``RESOLUTIONS``: a clause deleted,
a consent or waiver given, a loan repaid, a suit dismissed, a permit renewed)
gives a line ``Resolved: <key> (<path>): <what happened>.``, where ``<key>``
is the key of the open finding it settles, so that whoever collects the
answers for a whole room can drop that finding (the reader sees one chunk at a
time and cannot connect a clause to the amendment that deleted it). The best
``max_sentences`` findings per document, one per kind (and one resolution per
kind), are reported in document order.

Output: one JSON object per line, per open finding, with keys

- ``kind``: the claim kind (a GENERATED key, a CUAD slug, or ``other``);
- ``issue``: a short label ("Change-of-control termination right");
- ``path``: the document;
- ``parties``: names in the sentence (companies, people, agencies, permit
  numbers), without the target company and defined terms ("Company",
  "Agreement");
- ``amounts``: the money amounts in the sentence; when it states none, those
  of the nearest sentence of the same document that states fees, loans,
  principal or rent and names the same party (any, when the finding names
  none): the exposure the clause puts at risk;
- ``quote``: at most ``QUOTE_WORDS`` words of the sentence: the window that,
  with the finding's other fields, claims no other kind where it can, and
  shows the kind's signature;
- ``summary``: one sentence in the reviewer's words (the kind's signature
  phrases, the main party);
- ``next_step``: the kind's recommendation, addressed to the main party;
- ``key``: ``<kind> / <first party>`` (``<kind> / <path>`` when it names no
  party), shared by the finding and the ``Resolved:`` line that settles it;
- ``note``: the finding as one memo paragraph, in the reviewer's words:
  ``<issue> (<parties>, <amounts>), <path>: <summary> Quote: "<quote>" Next
  step: <next_step>`` (a 135M-parameter root copies a program that writes
  this far more reliably than one that formats the fields itself).

A document with none gets the line ``No diligence issues found in <path>.``.
When the lines exceed ``params.max_tokens`` (by ``count_tokens``), the best
findings that fit are kept, whole lines in document order (finish reason
``length``), so every line that comes back is whole. Token
usage is counted with ``count_tokens``; a prompt over ``context_tokens`` is
refused with ``ContextLimitError``.
"""

from __future__ import annotations

import functools
import json
import re
import time
from dataclasses import dataclass, field

from pipeline.config import BackendConfig
from pipeline.grading.claim_kinds import GENERATED, cuad_kinds
from pipeline.grading.criteria import normalize
from pipeline.llm.base import Completion, ContextLimitError, GenerationParams
from pipeline.llm.extractive_parties import PERMIT_ID, TARGET_LINE, parties, target_names
from pipeline.rooms.model import count_tokens

NAME = "extractive"
QUOTE_WORDS = 25

_HEADER_RES = [
    re.compile(r"^\s*={2,}\s*(?P<path>\S.*?)\s*={2,}\s*$"),
    re.compile(r"^\s*(?:#+\s*)?(?:document|path)\s*:\s*(?P<path>\S.*?)\s*$", re.IGNORECASE),
]
_PATHLIKE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+\.[A-Za-z0-9]{1,5})\b")

# Each pattern that matches adds its weight to a sentence's score.
RISK_PATTERNS: list[tuple[re.Pattern[str], float]] = [
    (re.compile(p, re.IGNORECASE), w)
    for p, w in [
        (r"change[\s-]+(?:of|in)[\s-]+control", 3),
        (r"\bassign(?:s|ed|ment|able)?\b", 1.5),
        (r"\bconsent\b", 1.5),
        (r"\bterminat\w*", 1.5),
        (r"\bexclusiv\w*", 2),
        (r"non[\s-]?compet\w*|non[\s-]?solicit\w*", 2),
        (r"most[\s-]+favou?red|no less favou?rable|\bmfn\b|\bbest price", 2.5),
        (r"\bindemnif\w*|\bindemnit\w*", 2),
        (r"\b(?:uncapped|unlimited)\b|without (?:any )?(?:cap|limit)", 2.5),
        (r"\bliabilit\w*", 1),
        (r"\bdefault\w*|\bacceleration\b|\bfinancial covenant\w*|\bcovenant breach\w*", 1.5),
        (r"\bprepay\w*|\bmake[\s-]?whole\b", 1.5),
        (r"\blitigat\w*|\blawsuit\w*|\bclaims?\b|\bdamages\b|\bplaintiff\w*|\bsettle\w*|\barbitrat\w*", 1.5),
        (
            r"\bseverance\b|\bgolden parachute\b|\bretention bonus\w*|\bsingle[\s-]trigger\b|\bdouble[\s-]trigger\b",
            2,
        ),
        (r"\binvent(?!or(?:y|ies))\w*", 1.5),  # not "inventory"
        (r"right of first (?:refusal|offer|negotiation)|\bside letter\b|\brebate\w*", 2),
        (r"\bintellectual property\b|\bpatent\w*|\blicens\w*", 1),
        (r"\blandlord\b|\blease\w*", 1),
        (
            r"\bpermit\w*|\bconsent (?:order|decree)\b|\bexpir\w*|\bviolation\w*|\bnon[\s-]?complian\w*|\bpenalt\w*",
            1.5,
        ),
        (r"\bbreach\w*|\bunauthori[sz]ed\b|\bnotif\w*|\bincident\b|\bpersonal data\b", 1.5),
        (r"\bguarant\w*|\blien\w*|\bpledge\w*|\bescrow\b|\bearn[\s-]?out\b", 1.5),
        (
            r"\bwaive\w*|\bmaterial adverse\b|\bkey[\s-]person\b|\bminimum (?:purchase|volume)\b|\btake[\s-]or[\s-]pay\b",
            1.5,
        ),
        (r"\btax (?:audit|assessment|deficiency)\b|\bunderpay\w*|\bcontingen\w*|\bwarrant(?:y|ies)\b", 1),
        (r"\bsole[\s-]source\b|\bsingle[\s-]source\b|\bconcentration\b", 1.5),
    ]
]
AMOUNT_RE = re.compile(
    r"(?:[$€£]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:million|billion|thousand|[mbk]n?)\b)?"
    r"|\b\d[\d,]*(?:\.\d+)?\s?(?:million|billion)\b"
    r"|\b(?:USD|EUR|GBP)\s?\d[\d,]*(?:\.\d+)?)",
    re.IGNORECASE,
)
_AMOUNT_WEIGHT = 1.5
_MIN_SCORE = 1.5  # one weak hit (e.g. "liability" alone) is not a finding
_MIN_WORDS = 6  # shorter pieces are headings and titles ("Re: Consent and waiver"), not findings
# Recitals and interpretation clauses that every agreement carries.
BOILERPLATE_RE = re.compile(
    r"now,? therefore|\bwhereas\b|in witness whereof|mutual covenants|shall be deemed to be followed"
    r"|counterparts|headings are for convenience|entered into by and between|\(this [\"\u201c]agreement",
    re.IGNORECASE,
)
# A representation that something is absent ("there are no pending claims") states no issue of a
# generated-room kind; nor does a non-exclusive grant state exclusivity.
NEGATED_RE = re.compile(
    r"\bthere (?:is|are) no\b|\bno knowledge\b|\bneither\b.{0,120}\bha(?:s|ve) received\b"
    r"|\bha(?:s|ve) not received\b|\bhas no obligation\b|\bnon[\s-]?exclusive\b",
    re.IGNORECASE,
)
# Legalese holding a CUAD category's words without being that kind of clause.
CUAD_NOISE = re.compile(
    r"(?:sole and )?exclusive (?:remedy|remedies|jurisdiction|venue|forum|property|owner)\w*|without (?:any )?penalty",
    re.IGNORECASE,
)
# A definition ('"Side Letter" means ...') is no finding.
DEFINITION_RE = re.compile(
    r"^(?:\(?\d+(?:\.\d+)*[.)]?\s+)?[\"\u201c][^\"\u201d]{1,80}[\"\u201d]\s+(?:means|shall mean|has the meaning|refers to)\b",
    re.IGNORECASE,
)
# A sentence that reports an issue resolved: (wording, the kind it resolves, how it was resolved).
# The kind is None where the sentence says it by signature ("termination ... upon a Change of
# Control ... is hereby deleted"); a payoff letter or a permit renewal names no signature phrase.
RESOLUTIONS: list[tuple[re.Pattern[str], str | None, str]] = [
    (re.compile(p, re.IGNORECASE), kind, how)
    for p, kind, how in [
        (r"hereby deleted|deleted in its entirety|no further force", None, "the clause was deleted"),
        (
            r"hereby (?:irrevocably )?(?:consents|waives)|waives any right",
            None,
            "the counterparty consented or waived",
        ),
        (r"\brepaid\b|paid in full", "debt_coc_default", "the debt was repaid"),
        (
            r"dismissed with prejudice|\bwithdrawn\b",
            "pending_litigation",
            "the action was dismissed or withdrawn",
        ),
        (r"(?:is|been) (?:hereby )?renewed|hereby renew", "expired_permit", "the permit was renewed"),
    ]
]
_MAX_SENTENCE_CHARS = 600
_SECTION_REF = re.compile(r"\b\d+\.\d+(?:\([a-z0-9]{1,4}\))*(?![\d,])")

# Words of an instruction that say nothing about what to look for.
_GENERIC = set(
    """
    about above after again against all also analyse analyze answer any are because been before
    below between both bullet bullets concise could diligence document documents each every
    extract file files find findings following from have here identify important into issue issues
    item items just list look more most note only other output please points provide quote quotes
    read relevant report return review risk risks section sentence sentences should show some such
    summarise summarize summary tell text than that their them then there these they this those
    through under very what when where which while with within would your json line lines object
    objects amounts parties next_step
    """.split()
)

# --------------------------------------------------------------------------- claim kinds
# Generated-room kinds in the order they are tried: a sentence takes the first kind it
# matches, so kinds whose signature is inside another's come after it (a change-of-control
# default or payment clause also says "terminat" or "consent"; a lease is an assignment clause).
KIND_ORDER = [
    "unreported_breach",
    "missing_side_letter",
    "debt_coc_default",
    "exec_cic_payment",
    "coc_termination",
    "lease_landlord_consent",
    "anti_assignment",
    "coc_consent",
    "exclusivity_affiliates",
    "mfn",
    "uncapped_indemnity",
    "missing_ip_assignment",
    "expired_permit",
    "tax_assessment",
    "pending_litigation",
]
assert set(KIND_ORDER) == set(GENERATED), "KIND_ORDER must list every claim kind of GENERATED"
# Kinds whose signature words are everyday contract words: the sentence must also say all of
# these (so "any action to enforce this Agreement" is no lawsuit, and a representation that
# "no tax deficiency has been asserted" or a list of "expirations" of waiting periods no finding).
KIND_CONTEXT: dict[str, list[re.Pattern[str]]] = {
    k: [re.compile(p, re.IGNORECASE) for p in ps]
    for k, ps in {
        "lease_landlord_consent": [r"\b(?:landlord|tenant|lease|premises|sublet)"],
        "pending_litigation": [
            r"(?-i:Plaintiff [A-Z]|[A-Z][\w&.-]+ claims (?:that|damages))|\bdemands? judgment|\bsued\b"
            r"|\bha(?:s|ve) (?:filed|brought|commenced) (?:a |an )?(?:complaint|suit|action|lawsuit)"
        ],
        "tax_assessment": [
            r"\btax",
            r"\bpropos|\bassessed\b|\bnotice of (?:proposed )?(?:assessment|deficiency)",
        ],
        "expired_permit": [
            r"\bpermit no\b|\bwithout a valid (?:permit|licen[cs]e)"
            r"|\b(?:permit|licen[cs]e|registration)\b[^;]{0,80}?\b(?:has |have )?(?:expired|lapsed)\b"
        ],
        "missing_ip_assignment": [
            r"\binventors?\s*:|\binventors? (?:named|listed)|\blists? .{0,60}\binventors?\b"
        ],
        "exec_cic_payment": [
            r"\bemploy|\bexecutive\b|\bbonus\b|\bseverance\b|\bequity awards?\b",
            r"[$\u20ac\u00a3]\s?\d|\btimes\b",  # an amount owed, not a list of plan types
        ],
        "exclusivity_affiliates": [
            r"\bcompet|\bexclusive (?:distribut|supplier|right|licen)|\bexclusively\b"
        ],
        # "including, without limitation" is legalese, not an uncapped indemnity
        "uncapped_indemnity": [
            r"uncapped|unlimited|\bno cap\b|not (?:be )?subject to any|not capped|no limitation"
            r"|without (?:any )?(?:cap\b|limit\b|limit (?:on|of|as))"
        ],
        "debt_coc_default": [
            r"\bloans?\b|\bobligations\b|\bborrower\b|\bevent of default\b|\bindebtedness\b|\bcredit\b|\bnotes?\b"
        ],
    }.items()
}
# Wordings that state a kind without its signature phrases (the signature is what the memo must say).
KIND_EXTRA: dict[str, re.Pattern[str]] = {
    k: re.compile(p, re.IGNORECASE)
    for k, p in {
        # an inventor listing: what a reviewer checks there is that every inventor assigned
        "missing_ip_assignment": r"\bpatent|\binvention",
        # "shall not be subject to any limitation of liability, cap or deductible"
        "uncapped_indemnity": r"\bindemn\w*.*\bnot (?:be )?subject to any (?:limitation|cap)",
    }.items()
}

# kind -> (issue label, summary, next step); {p}: the main party, {ps}: all parties
TEMPLATES: dict[str, tuple[str, str, str]] = {
    "coc_termination": (
        "Change-of-control termination right",
        "{p} can terminate the agreement on a change of control of the Company.",
        "Obtain a waiver from {p} before closing.",
    ),
    "coc_consent": (
        "Change-of-control consent requirement",
        "A change of control of the Company needs the consent of {p}.",
        "Obtain {p}'s consent before closing.",
    ),
    "anti_assignment": (
        "Anti-assignment clause",
        "The agreement may not be assigned, even by merger or operation of law, without the approval of {p}.",
        "Obtain a waiver from {p} for the transaction.",
    ),
    "exclusivity_affiliates": (
        "Exclusivity binding affiliates",
        "The exclusivity and non-compete covenant in favour of {p} binds the Company's affiliates, "
        "so it would bind the buyer after closing.",
        "Negotiate a carve-out for the buyer's group or a waiver from {p}.",
    ),
    "mfn": (
        "Most-favoured-customer pricing (MFN)",
        "{p} has most-favoured-customer (MFN) pricing: any better price offered to another customer must be "
        "extended to {p}, with refunds.",
        "Review prices offered to other customers for MFN exposure, or renegotiate the clause with {p}.",
    ),
    "uncapped_indemnity": (
        "Uncapped indemnity",
        "The Company's indemnity to {p} is uncapped: no limitation of liability, cap or deductible applies.",
        "Seek a cap from {p}, or cover the exposure with a specific indemnity or escrow.",
    ),
    "debt_coc_default": (
        "Change-of-control event of default",
        "A change of control of the Company is an event of default: {p} may declare the loans due and payable.",
        "Arrange a payoff letter or refinancing at closing, or a waiver from {p}.",
    ),
    "pending_litigation": (
        "Pending litigation",
        "{p} has a pending lawsuit against the Company.",
        "Have litigation counsel assess the merits of the claim by {p}; seek a specific indemnity or escrow.",
    ),
    "exec_cic_payment": (
        "Change-in-control payment to an executive",
        "{p} is owed a single-trigger change-in-control bonus, payable even if employment continues.",
        "Treat {p}'s payment as a transaction expense in the funds flow and run a 280G analysis.",
    ),
    "missing_ip_assignment": (
        "Patent inventors' assignments",
        "The patent lists {ps} as inventors; each must have assigned the invention to the Company.",
        "Check the employment files and obtain a confirmatory assignment from each inventor before closing.",
    ),
    "lease_landlord_consent": (
        "Landlord consent to transfer",
        "As landlord, {p} must consent to a transfer of a controlling interest in the Company, the tenant.",
        "Obtain {p}'s consent or an estoppel certificate before closing.",
    ),
    "expired_permit": (
        "Expired permit",
        "{p} has expired and the facility operates without a valid permit, exposing the Company to penalties.",
        "Renew {p} before closing, or make its renewal a closing condition.",
    ),
    "unreported_breach": (
        "Unreported data breach",
        "Customer data hosted by {p} was exfiltrated{records}, and no notice has been given to individuals "
        "or regulators.",
        "Have privacy counsel assess the duty to notify regulators; seek a specific indemnity for the incident at {p}.",
    ),
    "missing_side_letter": (
        "Side letter outside the contract",
        "The board ratified a side letter with {p} granting a rebate and a right of first refusal.",
        "Request a copy of the side letter with {p} and check it against {p}'s customer agreement.",
    ),
    "tax_assessment": (
        "Proposed tax assessment",
        "{p} proposes a tax assessment against the Company.",
        "Seek a tax indemnity or escrow for the assessment proposed by {p}.",
    ),
    "other": ("Answer to the request", "", ""),
}
assert set(KIND_ORDER) <= set(TEMPLATES)
# who {p} is when the sentence names no party
_NO_PARTY = {
    "exec_cic_payment": "the executive",
    "tax_assessment": "the tax authority",
    "expired_permit": "the permit",
    "missing_ip_assignment": "the inventors",
    "lease_landlord_consent": "the landlord",
}
_AMENDED = " The right was added by amendment."


@functools.lru_cache(maxsize=4096)
def _phrase_re(phrase: str) -> re.Pattern[str]:
    p = normalize(phrase).strip()
    return re.compile((r"(?<!\w)" if p[:1].isalnum() else "") + re.escape(p))


def holds(norm: str, phrase: str) -> bool:
    """``phrase`` in normalized text, at a word start (pipeline.grading.criteria's phrase matching)."""
    return bool(_phrase_re(phrase).search(norm))


def matches(norm: str, groups: list[list[str]]) -> bool:
    """One phrase of every group in normalized text."""
    return all(any(holds(norm, p) for p in g) for g in groups)


@functools.cache
def _cuad() -> tuple[dict[str, list[list[str]]], dict[str, str]]:
    """CUAD slug -> signature, and slug -> the label a reviewer writes (one of its synonyms)."""
    from pipeline.rooms.cuad import CATEGORIES_CUAD

    kinds = cuad_kinds()
    labels = {
        c.slug: c.label if any(holds(normalize(c.label), s) for s in c.synonyms) else c.synonyms[0]
        for c in CATEGORIES_CUAD
    }
    return kinds, labels


def claimed_kinds(text: str) -> set[str]:
    """The generated-room kinds whose signature ``text`` holds."""
    norm = normalize(text)
    return {k for k, groups in GENERATED.items() if matches(norm, groups)}


def resolution(sentence: str) -> tuple[str, str] | None:
    """(the generated-room kind, how) when the sentence reports an issue of that kind resolved."""
    for rx, kind, how in RESOLUTIONS:
        if rx.search(sentence):
            norm = normalize(sentence)
            kind = kind or next((k for k in KIND_ORDER if matches(norm, GENERATED[k])), None)
            return (kind, how) if kind else None
    return None


def kind_of(sentence: str) -> str | None:
    """The claim kind a sentence states as an open issue (see the module docstring), or None."""
    if any(rx.search(sentence) for rx, _, _ in RESOLUTIONS):
        return None
    norm = normalize(sentence)
    for kind in KIND_ORDER if not NEGATED_RE.search(sentence) else ():
        if not all(rx.search(sentence) for rx in KIND_CONTEXT.get(kind, ())):
            continue
        extra = KIND_EXTRA.get(kind)
        if extra is not None and extra.search(sentence):
            return kind
        if matches(norm, GENERATED[kind]):
            return kind
    kinds, _ = _cuad()
    norm = normalize(CUAD_NOISE.sub(" ", sentence))
    for slug, groups in kinds.items():
        if matches(norm, groups):
            return slug
    return None


# --------------------------------------------------------------------------- amounts, quote
_EXPOSURE = re.compile(r"\bfees\b|\bprincipal\b|\bloans?\b|\brent\b|\bpurchase price\b", re.IGNORECASE)
_RECORDS = re.compile(r"\b(\d{1,3}(?:,\d{3})+|\d{4,})\s+(?:\w+\s+)?records\b", re.IGNORECASE)
_ENUM = re.compile(r"^\(?\d+(?:\.\d+)*[.)]?\s+|^\([a-z]{1,3}\)\s+")


def amounts(sentence: str) -> list[str]:
    return list(dict.fromkeys(m.group(0).strip().rstrip(",.") for m in AMOUNT_RE.finditer(sentence)))


def _spans(words: list[str], phrases: set[str]) -> dict[str, list[tuple[int, int]]]:
    """phrase -> (first word, last word) of each place it occurs in ``words`` (as ``holds`` matches)."""
    parts = [normalize(w) for w in words]
    norm = " ".join(parts)
    owner: list[int] = []  # character -> index of its word
    for i, part in enumerate(parts):
        owner += [i] * (len(part) + 1)
    out: dict[str, list[tuple[int, int]]] = {}
    for phrase in phrases:
        if normalize(phrase).strip() in norm:
            spans = [(owner[m.start()], owner[m.end() - 1]) for m in _phrase_re(phrase).finditer(norm)]
            if spans:
                out[phrase] = spans
    return out


@functools.cache
def _generated_phrases() -> frozenset[str]:
    return frozenset(p for groups in GENERATED.values() for g in groups for p in g)


def quote(sentence: str, kind: str, rest: str = "", n_words: int = QUOTE_WORDS) -> str:
    """At most ``n_words`` words of the sentence, marked "..." where cut.

    Of the windows of ``n_words``, 20 and 15 words, the one that, with ``rest``
    (the finding's other text), claims the fewest kinds other than ``kind``,
    then shows most of the kind's signature groups, then is longest and earliest.
    """
    words = _ENUM.sub("", sentence).split()
    groups = GENERATED.get(kind) or _cuad()[0].get(kind) or []
    phrases = _generated_phrases() | {p for g in groups for p in g}
    spans = _spans(words, phrases)
    rest_norm = normalize(rest)
    in_rest = {p for p in _generated_phrases() if holds(rest_norm, p)}
    others = [groups_ for k, groups_ in GENERATED.items() if k != kind]

    def present(phrase: str, i: int, j: int) -> bool:
        return any(i <= a and b < j for a, b in spans.get(phrase, ()))

    best: tuple | None = None
    for size in sorted({min(len(words), n) for n in (n_words, 20, 15)}, reverse=True):
        for i in range(len(words) - size + 1):
            j = i + size
            shown = sum(any(present(p, i, j) for p in g) for g in groups)
            extra = sum(all(any(p in in_rest or present(p, i, j) for p in g) for g in gs) for gs in others)
            key = (extra, -shown, -size, i)
            if best is None or key < best[0]:
                best = (key, i, size)
    assert best is not None
    _, i, size = best
    return ("..." if i > 0 else "") + " ".join(words[i : i + size]) + ("..." if i + size < len(words) else "")


# --------------------------------------------------------------------------- prompt parsing


@dataclass
class Block:
    path: str
    text: str


def parse_prompt(prompt: str) -> tuple[str, list[Block]]:
    """Split a prompt into (instruction, documents) by the header convention above."""
    instruction: list[str] = []
    blocks: list[Block] = []
    current: list[str] | None = None
    path = ""
    for line in prompt.splitlines():
        header = None
        for rx in _HEADER_RES:
            m = rx.match(line)
            if m and m.group("path").strip("=").strip():
                header = m.group("path").strip("=").strip()
                break
        if header is not None:
            if current is not None:
                blocks.append(Block(path, "\n".join(current)))
            path, current = header, []
        elif current is None:
            instruction.append(line)
        else:
            current.append(line)
    if current is not None:
        blocks.append(Block(path, "\n".join(current)))
    if not blocks:
        m = _PATHLIKE.search(prompt)
        return "", [Block(m.group(1) if m else "prompt", prompt)]
    return "\n".join(instruction), blocks


def split_sentences(text: str) -> list[str]:
    """Sentences (and list items / headings) with whitespace collapsed."""
    out = []
    for para in re.split(r"\n\s*\n|\n(?=\s*(?:[-*•]|\d+[.)]|\(\w\))\s)", text):
        para = " ".join(para.split())
        if not para:
            continue
        # A period after a digit ("1.5 million", "Section 4.2") or an abbreviation is not an end.
        for s in re.split(
            r"(?<=[.!?;])(?<!\b[A-Z]\.)(?<!\bNo\.)(?<!\bInc\.)(?<!\bSec\.)\s+(?=[A-Z(\"'])", para
        ):
            s = s.strip()
            if len(s) > 3:
                out.append(s if len(s) <= _MAX_SENTENCE_CHARS else s[: _MAX_SENTENCE_CHARS - 3] + "...")
    return out


def instruction_terms(instruction: str) -> set[str]:
    instruction = TARGET_LINE.sub("", instruction)
    words = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z-]{5,}", instruction)}
    return {w for w in words if w not in _GENERIC}


def score_sentence(sentence: str, terms: set[str] = frozenset()) -> float:
    if len(sentence.split()) < _MIN_WORDS or BOILERPLATE_RE.search(sentence):
        return 0.0
    if len(_SECTION_REF.findall(sentence)) >= 3 or DEFINITION_RE.match(sentence):
        return 0.0  # a table of contents or index line; a definition
    score = sum(w for rx, w in RISK_PATTERNS if rx.search(sentence))
    if AMOUNT_RE.search(sentence):
        score += _AMOUNT_WEIGHT
    if terms:
        lowered = sentence.lower()
        score += sum(1.0 for t in terms if t in lowered)
    return score


# --------------------------------------------------------------------------- findings


@dataclass
class Finding:
    """One finding; ``line()`` is its output line (the keys of the module docstring)."""

    kind: str
    issue: str
    path: str
    parties: list[str]
    amounts: list[str]
    quote: str
    summary: str
    next_step: str
    status: str = "open"
    score: float = field(default=0.0, compare=False)
    index: int = field(default=0, compare=False)

    @property
    def key(self) -> str:
        """What the finding is about: its kind and main party (its document when it names none)."""
        return f"{self.kind} / {self.parties[0] if self.parties else self.path}"

    @property
    def note(self) -> str:
        """The finding as one memo paragraph: label, parties and amounts, path, summary, quote, next step."""
        who = ", ".join(self.parties + self.amounts)
        return (
            f"{self.issue}{f' ({who})' if who else ''}, {self.path}: {self.summary}"
            f' Quote: "{self.quote}" Next step: {self.next_step}'
        )

    def line(self) -> str:
        if self.status == "resolved":
            return f"Resolved: {self.key} ({self.path}): {self.summary}"
        keys = ("kind", "issue", "path", "parties", "amounts", "quote", "summary", "next_step", "key", "note")
        return json.dumps({k: getattr(self, k) for k in keys}, ensure_ascii=False)


def _texts(kind: str, who: list[str], sentence: str) -> tuple[str, str, str]:
    """(issue, summary, next step) of a finding."""
    if kind in TEMPLATES:
        issue, summary, step = TEMPLATES[kind]
    else:  # a CUAD category
        label = _cuad()[1][kind]
        issue = f"{label[:1].upper()}{label[1:]} clause"
        article = "an" if label[:1].lower() in "aeiou" else "a"
        summary = f"The agreement with {{p}} contains {article} {label} provision."
        step = f"Review the {label} provision with {{p}} and address it in the deal terms."
    p = who[0] if who else _NO_PARTY.get(kind, "the counterparty")
    if kind == "expired_permit":
        pid = next((w for w in who if PERMIT_ID.fullmatch(w)), None)
        p = f"Permit {pid}" if pid else "the permit"
    elif kind == "tax_assessment" and who:
        p = f"the {p}"
    ps = ", ".join(who[:-1]) + f" and {who[-1]}" if len(who) > 1 else p
    m = _RECORDS.search(sentence)
    fill = {"p": p, "ps": ps, "records": f" (about {m.group(1)} records)" if m else ""}
    summary, step = summary.format(**fill), step.format(**fill)
    if kind == "coc_termination" and re.search(r"\bamend", sentence, re.IGNORECASE):
        summary += _AMENDED
    return issue, summary[:1].upper() + summary[1:], step[:1].upper() + step[1:]


def block_findings(
    block: Block, terms: set[str], exclude: tuple[str, ...], max_findings: int
) -> list[Finding]:
    """The findings of one document block (see the module docstring)."""
    sentences = split_sentences(block.text)
    exclude = exclude + target_names("", block.text)
    best: dict[tuple[str, str], Finding] = {}
    for i, s in enumerate(sentences):
        score = score_sentence(s, terms)
        resolved = resolution(s) if len(s.split()) >= _MIN_WORDS else None
        if score < _MIN_SCORE and resolved is None:
            continue
        status = "resolved" if resolved else "open"
        kind = resolved[0] if resolved else kind_of(s)
        if kind is None:
            if not terms or not any(t in s.lower() for t in terms):
                continue
            kind = "other"
        if (kind, status) in best and best[kind, status].score >= score:
            continue
        who = parties(s, exclude)
        money = amounts(s)
        if not money:  # the exposure is often stated in another clause about the same party
            for j in sorted(range(len(sentences)), key=lambda j: abs(j - i)):
                t = sentences[j]
                if j != i and _EXPOSURE.search(t) and (not who or any(w in t for w in who)) and amounts(t):
                    money = amounts(t)
                    break
        issue, summary, step = _texts(kind, who, s)
        if resolved:
            summary = f"{issue} resolved: {resolved[1]}."
            step = ""
        rest = " ".join([issue, *who, summary, step])
        q = quote(s, kind, rest) if kind != "other" else " ".join(_ENUM.sub("", s).split()[:QUOTE_WORDS])
        best[kind, status] = Finding(kind, issue, block.path, who, money, q, summary, step, status, score, i)
    keep = sorted(best.values(), key=lambda f: (-f.score, f.index))[:max_findings]
    return sorted(keep, key=lambda f: f.index)


def _items(prompt: str, max_sentences: int) -> list[tuple[tuple[int, int], float, str]]:
    """(place in the output, score, line) of every output line."""
    instruction, blocks = parse_prompt(prompt)
    terms = instruction_terms(instruction)
    exclude = target_names(instruction, "")
    items: list[tuple[tuple[int, int], float, str]] = []
    for b, block in enumerate(blocks):
        found = block_findings(block, terms, exclude, max_sentences)
        items += [((b, f.index), f.score, f.line()) for f in found]
        if not found:
            items.append(((b, -1), float("inf"), f"No diligence issues found in {block.path}."))
    return items


def _fit(items: list[tuple[tuple[int, int], float, str]], max_tokens: int) -> list[str]:
    """The lines that fit in ``max_tokens``, best first, back in document order; at least one."""
    kept, used = [], 0
    for item in sorted(items, key=lambda x: (-x[1], x[0])):
        n = count_tokens(item[2] + "\n")
        if not kept or used + n <= max_tokens:
            kept.append(item)
            used += n
    return [line for _, _, line in sorted(kept)]


def extract(prompt: str, max_sentences: int = 8, max_tokens: int | None = None) -> list[str]:
    """The output lines for a prompt (see the module docstring); with ``max_tokens``, those that fit."""
    items = _items(prompt, max_sentences)
    return [line for _, _, line in items] if max_tokens is None else _fit(items, max_tokens)


class ExtractiveBackend:
    """Backend wrapper around ``extract``; reads the user messages of a request."""

    def __init__(self, cfg: BackendConfig, *, max_sentences: int = 8) -> None:
        self.name = NAME
        self.context_tokens = cfg.context_tokens
        self.max_sentences = max_sentences

    async def complete(self, messages: list[dict[str, str]], params: GenerationParams) -> Completion:
        start = time.monotonic()
        prompt_tokens = sum(count_tokens(m.get("content") or "") for m in messages)
        if prompt_tokens > self.context_tokens:
            raise ContextLimitError(
                f"prompt of ~{prompt_tokens} tokens exceeds the {self.context_tokens}-token context of {self.name}"
            )
        # System prompts are instructions to a model; the reader only reads the user's text.
        prompt = "\n".join(m.get("content") or "" for m in messages if m.get("role", "user") == "user")
        items = _items(prompt, self.max_sentences)
        kept = _fit(items, params.max_tokens)
        finish = "length" if len(kept) < len(items) else "stop"
        text = "\n".join(kept)
        return Completion(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=count_tokens(text),
            latency_s=time.monotonic() - start,
            model=self.name,
            finish_reason=finish,
        )

    async def aclose(self) -> None:
        return None


def make_extractive(cfg: BackendConfig) -> ExtractiveBackend:
    return ExtractiveBackend(cfg)
