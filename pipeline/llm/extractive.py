"""Extractive subagent: a deterministic keyword reader. It is NOT an LLM.

It stands in for a subagent model so the whole pipeline runs on a CPU in
minutes: given a prompt holding one or more documents, it returns the
sentences that bear on diligence risks (change of control, assignment and
consent, termination, exclusivity, non-compete, most-favoured-nation,
indemnities, uncapped liability, defaults and prepayment, litigation and
damages, change-in-control payments, invention assignment, landlord consent,
permits and consent orders, breaches and notification, money amounts, ...).
Same prompt, same answer.

Prompt convention (the root's prompts are free text, so parsing is lenient):

- A document starts with a line ``=== <path> ===``; a line ``Document: <path>``
  or ``Path: <path>`` also starts one. Its text runs to the next such line.
- Text before the first document is the instruction. Longer words of the
  instruction (e.g. "indemnification", "landlord") also select sentences.
- With no such line, the whole prompt is one document, named by the first
  path-like token in it (``folder/file.ext``) or ``prompt``.

Output: one line per finding, ``[<path>] <sentence>``, in document order, at
most ``max_sentences`` per document; a document with none gets
``No diligence issues found in <path>.``. Output beyond ``params.max_tokens``
(by ``count_tokens``) is dropped a whole line at a time. Token usage is
counted with ``count_tokens``; a prompt over ``context_tokens`` is refused
with ``ContextLimitError``.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from pipeline.config import BackendConfig
from pipeline.llm.base import Completion, ContextLimitError, GenerationParams, register
from pipeline.rooms.model import count_tokens

NAME = "extractive"

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
        (r"most[\s-]+favou?red", 2.5),
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
    r"|counterparts|headings are for convenience",
    re.IGNORECASE,
)
_MAX_SENTENCE_CHARS = 600

# Words of an instruction that say nothing about what to look for.
_GENERIC = set(
    """
    about above after again against all also analyse analyze answer any are because been before
    below between both bullet bullets concise could diligence document documents each every
    extract file files find findings following from have here identify important into issue issues
    item items just list look more most note only other output please points provide quote quotes
    read relevant report return review risk risks section sentence sentences should show some such
    summarise summarize summary tell text than that their them then there these they this those
    through under very what when where which while with within would your
    """.split()
)


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
    words = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z-]{5,}", instruction)}
    return {w for w in words if w not in _GENERIC}


def score_sentence(sentence: str, terms: set[str] = frozenset()) -> float:
    if len(sentence.split()) < _MIN_WORDS or BOILERPLATE_RE.search(sentence):
        return 0.0
    score = sum(w for rx, w in RISK_PATTERNS if rx.search(sentence))
    if AMOUNT_RE.search(sentence):
        score += _AMOUNT_WEIGHT
    if terms:
        lowered = sentence.lower()
        score += sum(1.0 for t in terms if t in lowered)
    return score


def extract(prompt: str, max_sentences: int = 8) -> list[str]:
    """The output lines for a prompt (see the module docstring)."""
    instruction, blocks = parse_prompt(prompt)
    terms = instruction_terms(instruction)
    lines: list[str] = []
    for block in blocks:
        scored = [(score_sentence(s, terms), i, s) for i, s in enumerate(split_sentences(block.text))]
        keep = [x for x in scored if x[0] >= _MIN_SCORE]
        # The best ones, then back into reading order.
        keep = sorted(sorted(keep, key=lambda x: (-x[0], x[1]))[:max_sentences], key=lambda x: x[1])
        if keep:
            lines.extend(f"[{block.path}] {s}" for _, _, s in keep)
        else:
            lines.append(f"No diligence issues found in {block.path}.")
    return lines


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
        lines = extract(prompt, self.max_sentences)
        kept: list[str] = []
        used = 0
        finish = "stop"
        for line in lines:
            n = count_tokens(line + "\n")
            if kept and used + n > params.max_tokens:
                finish = "length"
                break
            kept.append(line)
            used += n
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


@register("extractive")
def make_extractive(cfg: BackendConfig) -> ExtractiveBackend:
    return ExtractiveBackend(cfg)
