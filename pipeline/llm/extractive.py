"""Extractive subagent: a deterministic keyword reader. It is NOT an LLM.

It stands in for a subagent model so the whole pipeline runs on a CPU in
minutes: given a prompt holding one or more documents, it finds the sentences
that state a diligence risk and reports the facts of each as a structured
finding (the kind of clause, the parties, amounts and dates, the documents it
refers to, a short quotation). It writes no memo prose: no verdict, no
recommendation, and nothing about the rest of the room (whether a side letter
the minutes mention is in the room is a fact about the whole room, which only
the root can check). Composing the memo is the root's work. Same prompt, same
answer.

Prompt convention (the root's prompts are free text, so parsing is lenient):

- A document starts with a line ``=== <path> ===``; a line ``Document: <path>``
  or ``Path: <path>`` also starts one. Its text runs to the next such line.
- Text before the first document is the instruction. Longer words of the
  instruction (e.g. "indemnification", "landlord") also select sentences; a
  line ``Target: <name>`` there names the target company (never a party).
- With no such line, the whole prompt is one document, named by the first
  path-like token in it (``folder/file.ext``) or ``prompt``.

Which sentences: a sentence is a finding when it scores as risky (weighted
risk patterns, ``RISK_PATTERNS``) and states one of the reader's risks
(pipeline.llm.reader_vocabulary.RISKS, tried in order, each with the wording
that separates it from boilerplate, so that "any action to enforce this
Agreement" is no lawsuit) or, failing those, a commercial-contract clause
(``CLAUSES``). That vocabulary is the reader's own: it never reads the
judge's rubric phrases (pipeline.grading; tests/test_layering.py forbids the
import), as a subagent model would not. One exception to the wording: an
inventor listing on a patent ("Inventors: A, B and C") is a
``missing_ip_assignment`` finding although it names no assignment, because
what a reviewer must check there is that every inventor assigned. Risky
sentences of no kind are dropped, unless words of the instruction selected
them: those come back as kind ``other``.

A sentence that reports an issue resolved (``RESOLUTIONS``: a clause deleted,
a consent or waiver given, a loan repaid, a suit dismissed, a permit renewed)
gives a line ``Resolved: <key> (<path>): <what happened>.``, where ``<key>``
is the key of the open finding it settles, so that whoever collects the
answers for a whole room can drop that finding (the reader sees one chunk at a
time and cannot connect a clause to the amendment that deleted it). The best
``max_sentences`` findings per document, one per kind (and one resolution per
kind), are reported in document order.

Output: one JSON object per line, per open finding, with keys

- ``kind``: the risk or clause (a key of ``RISKS`` or ``CLAUSES``, or ``other``);
- ``issue``: the kind's label ("Termination right on a change of control");
- ``path``: the document;
- ``parties``: names in the sentence (companies, people, agencies, permit
  numbers), without the target company and defined terms ("Company",
  "Agreement");
- ``amounts``: the money amounts in the sentence (and "<n> records" where it
  counts records exposed); when it states none, those
  of the nearest sentence of the same document that states fees, loans,
  principal or rent and names the same party (any, when the finding names
  none): the exposure the clause puts at risk;
- ``dates``: the dates in the sentence;
- ``refers_to``: the kinds of other documents the sentence names ("side
  letter", "amendment no. 2", "payoff letter"), lower case;
- ``quote``: at most ``QUOTE_WORDS`` words of the sentence: the window that,
  with the finding's label and parties, states no other risk where it can,
  and shows the risk's wording;
- ``key``: ``<kind> / <first party>`` (``<kind> / <path>`` when it names no
  party), shared by the finding and the ``Resolved:`` line that settles it.

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
from pipeline.llm.base import Completion, ContextLimitError, GenerationParams
from pipeline.llm.extractive_parties import TARGET_LINE, parties, target_names
from pipeline.llm.literal_stems import Prefiltered
from pipeline.llm.reader_vocabulary import CLAUSE, CLAUSES, RISK, RISKS, Risk
from pipeline.rooms.model import count_tokens

NAME = "extractive"
QUOTE_WORDS = 25

_HEADER_RES = [
    re.compile(r"^\s*={2,}\s*(?P<path>\S.*?)\s*={2,}\s*$"),
    re.compile(r"^\s*(?:#+\s*)?(?:document|path)\s*:\s*(?P<path>\S.*?)\s*$", re.IGNORECASE),
]
_PATHLIKE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+\.[A-Za-z0-9]{1,5})\b")

# Each pattern that matches adds its weight to a sentence's score. Searched through their literal
# stems (pipeline.llm.literal_stems): a pattern that cannot match costs a substring check.
RISK_PATTERNS: list[tuple[Prefiltered, float]] = [
    (Prefiltered(p), w)
    for p, w in [
        (r"change[\s-]+(?:of|in)[\s-]+control", 3),
        (r"\bassign(?:s|ed|ment|able)?\b", 1.5),
        (r"\bconsent\b", 1.5),
        (r"\bterminat\w*", 1.5),
        (r"\bexclusiv\w*", 2),
        (r"non[\s-]?compet\w*|non[\s-]?solicit\w*", 2),
        (r"most[\s-]+favou?red|no less favou?rable|\bmfn\b|\bbest price", 2.5),
        (r"\bindemnif\w*|\bindemnit\w*", 2),
        (r"\buncapped\b|\bunlimited\b|without (?:any )?(?:cap|limit)", 2.5),
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
# Legalese holding a clause's words without being that kind of clause.
CLAUSE_NOISE = re.compile(
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

# --------------------------------------------------------------------------- risks
# The reader's own vocabulary (pipeline.llm.reader_vocabulary), tried in its order: a sentence takes
# the first risk it states, so a change-of-control default is not read as a termination right.
KIND_ORDER = [r.key for r in RISKS]


def _states(sentence: str, risk: Risk) -> bool:
    """The sentence states ``risk``: its context, then its own wording or every one of its signs."""
    if not all(rx.search(sentence) for rx in risk.context):
        return False
    if risk.alone is not None and risk.alone.search(sentence):
        return True
    return all(rx.search(sentence) for rx in risk.signs)


def claimed_kinds(text: str) -> set[str]:
    """The reader's risks that ``text`` states (what a note about one risk must not also say)."""
    return {r.key for r in RISKS if _states(text, r)}


def resolution(sentence: str) -> tuple[str, str] | None:
    """(the risk, how) when the sentence reports a risk resolved."""
    for rx, kind, how in RESOLUTIONS:
        if rx.search(sentence):
            kind = kind or next((r.key for r in RISKS if all(s.search(sentence) for s in r.signs)), None)
            return (kind, how) if kind else None
    return None


def kind_of(sentence: str) -> str | None:
    """The risk (or, failing one, the clause) a sentence states as open (see the module docstring), or None."""
    if any(rx.search(sentence) for rx, _, _ in RESOLUTIONS):
        return None
    if not NEGATED_RE.search(sentence):
        for risk in RISKS:
            if _states(sentence, risk):
                return risk.key
    plain = CLAUSE_NOISE.sub(" ", sentence)
    return next((c.key for c in CLAUSES if c.pattern.search(plain)), None)


# --------------------------------------------------------------------------- amounts, quote
_EXPOSURE = re.compile(r"\bfees\b|\bprincipal\b|\bloans?\b|\brent\b|\bpurchase price\b", re.IGNORECASE)
_ENUM = re.compile(r"^\(?\d+(?:\.\d+)*[.)]?\s+|^\([a-z]{1,3}\)\s+")


# A count of records exposed is the figure a data incident is measured by.
_RECORDS = re.compile(r"\b(\d{1,3}(?:,\d{3})+|\d{4,})\s+(?:\w+\s+)?records\b", re.IGNORECASE)


def amounts(sentence: str) -> list[str]:
    """The money amounts of the sentence, and the number of records it says were exposed."""
    found = [m.group(0).strip().rstrip(",.") for m in AMOUNT_RE.finditer(sentence)]
    found += [f"{m.group(1)} records" for m in _RECORDS.finditer(sentence)]
    return list(dict.fromkeys(found))


def _signs(kind: str) -> tuple[re.Pattern[str], ...]:
    if kind in RISK:
        return RISK[kind].signs
    return (CLAUSE[kind].pattern,) if kind in CLAUSE else ()


def quote(sentence: str, kind: str, rest: str = "", n_words: int = QUOTE_WORDS) -> str:
    """At most ``n_words`` words of the sentence, marked "..." where cut.

    Of the windows of ``n_words``, 20 and 15 words, the one that, with ``rest``
    (the finding's other text), states the fewest risks other than ``kind``,
    then shows most of the kind's signs, then is longest and earliest: the
    quote backs the note up without suggesting another finding.
    """
    words = _ENUM.sub("", sentence).split()
    signs = _signs(kind)
    best: tuple | None = None
    for size in sorted({min(len(words), n) for n in (n_words, 20, 15)}, reverse=True):
        for i in range(len(words) - size + 1):
            window = " ".join(words[i : i + size])
            shown = sum(1 for rx in signs if rx.search(window))
            extra = len(claimed_kinds(window + " " + rest) - {kind})
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
    lowered = sentence.lower()
    ascii_lowered = lowered if sentence.isascii() else None  # the stems' prefilter is exact for ASCII only
    score = sum(w for rx, w in RISK_PATTERNS if rx.search(sentence, ascii_lowered))
    if AMOUNT_RE.search(sentence):
        score += _AMOUNT_WEIGHT
    if terms:
        score += sum(1.0 for t in terms if t in lowered)
    return score


# --------------------------------------------------------------------------- findings


# Dates as agreements write them: "March 4, 2019", "4 March 2019", "2019-03-04".
_MONTH = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
DATE_RE = re.compile(
    rf"\b{_MONTH} \d{{1,2}}, \d{{4}}\b|\b\d{{1,2}} {_MONTH} \d{{4}}\b|\b\d{{4}}-\d{{2}}-\d{{2}}\b"
)
# Other documents a sentence refers to by kind: what a root can look for in the rest of the room.
REFERS_RE = re.compile(
    r"\bside letter\b|\bamendment(?: no\.? ?\d+)?|\bpayoff letter\b|\b(?:consent|waiver)(?: letter)?\b"
    r"|\binvention assignment\b|\bpiia\b|\bschedule [a-z0-9]+\b|\bexhibit [a-z0-9]+\b|\bcomplaint\b|\bpermit\b",
    re.IGNORECASE,
)


def dates(sentence: str) -> list[str]:
    return list(dict.fromkeys(m.group(0) for m in DATE_RE.finditer(sentence)))


def refers_to(sentence: str) -> list[str]:
    """The kinds of other documents the sentence names ("side letter", "amendment no. 2"), lower case."""
    return list(dict.fromkeys(" ".join(m.group(0).lower().split()) for m in REFERS_RE.finditer(sentence)))


@dataclass(frozen=True)
class Finding:
    """One finding; ``line()`` is its output line (the keys of the module docstring)."""

    kind: str
    issue: str
    path: str
    parties: list[str]
    amounts: list[str]
    dates: list[str]
    refers_to: list[str]
    quote: str
    status: str = "open"
    how: str = ""  # a resolved finding: what resolved it
    score: float = field(default=0.0, compare=False)
    index: int = field(default=0, compare=False)

    @property
    def key(self) -> str:
        """What the finding is about: its kind and main party (its document when it names none)."""
        return f"{self.kind} / {self.parties[0] if self.parties else self.path}"

    def line(self) -> str:
        if self.status == "resolved":
            return f"Resolved: {self.key} ({self.path}): {self.how}."
        keys = ("kind", "issue", "path", "parties", "amounts", "dates", "refers_to", "quote", "key")
        return json.dumps({k: getattr(self, k) for k in keys}, ensure_ascii=False)


def label(kind: str) -> str:
    """The kind's label in the reader's words: what kind of clause it is, not what to do about it."""
    if kind == "other":
        return "Answer to the request"
    if kind in RISK:
        return RISK[kind].label
    clause = CLAUSE[kind]
    return f"{clause.label[:1].upper()}{clause.label[1:]} clause"


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
        issue = label(kind)
        rest = " ".join([issue, *who])
        q = quote(s, kind, rest) if kind != "other" else " ".join(_ENUM.sub("", s).split()[:QUOTE_WORDS])
        how = resolved[1] if resolved else ""
        best[kind, status] = Finding(
            kind, issue, block.path, who, money, dates(s), refers_to(s), q, status, how, score, i
        )
    keep = sorted(best.values(), key=lambda f: (-f.score, f.index))[:max_findings]
    return sorted(keep, key=lambda f: f.index)


# A room's blocks under one request: the ladder reads up to a 300-document room's with every rung. At most
# 1,024 blocks of at most a subagent's context each (32 MB at 8,192 tokens), so a 5,000-document room
# cycles through it without holding its text.
@functools.lru_cache(maxsize=1024)
def _cached_findings(
    path: str, text: str, terms: frozenset[str], exclude: tuple[str, ...], max_findings: int
) -> tuple[Finding, ...]:
    """``block_findings``, remembered: the reader is a pure function of the block and the request, and the
    same document is read with the same request again and again (the ladder's rungs over one room, a
    room's k episodes). 2.4x on the ladder, same rows (measured: tests/bench/bench_ladder.py's rooms)."""
    return tuple(block_findings(Block(path, text), set(terms), exclude, max_findings))


def _items(prompt: str, max_sentences: int) -> list[tuple[tuple[int, int], float, str]]:
    """(place in the output, score, line) of every output line."""
    instruction, blocks = parse_prompt(prompt)
    terms = frozenset(instruction_terms(instruction))
    exclude = target_names(instruction, "")
    items: list[tuple[tuple[int, int], float, str]] = []
    for b, block in enumerate(blocks):
        found = _cached_findings(block.path, block.text, terms, exclude, max_sentences)
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
