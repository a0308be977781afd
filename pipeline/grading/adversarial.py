"""Adversarial known-answer memos: what an optimiser would try, drawn fresh from a seed.

Rejection sampling and RL push the policy toward whatever the reference judge
overpays, so the judge is tested against the memos such a search would find.
Each maker takes the room and a ``random.Random``; the same seed gives the
same memo, and tests draw a new seed each run (printed when a bar fails).

| memo | what it is | headline should be |
|---|---|---|
| near_copy | the issue paragraphs of the room (and more, to the budget), pasted with small edits: words inserted, dropped, replaced by synonyms, sentences reordered, case and punctuation changed, never 8 words verbatim; the rubric's own words (entities, phrases, amounts) are kept, with a next step of its own | near 0 |
| claim_stuffing | the oracle's findings, then compact claims of random kinds on random documents to the end of the reading budget | near 0 |
| wrong_citation | the oracle's findings, each cited to a document that does not support it | near 0 |
| repetition | one true finding, repeated (lightly edited) to the end of the reading budget | near 0 |
| paraphrase | a reviewer's memo: every finding of the oracle in other words (from the rubric's prose), same citations, amounts written another way | near 1 |

The attacker knows the rubric: edits never touch an entity, a rubric phrase,
an amount or a path, so a near-copy keeps every field a criterion asks for.
"""

from __future__ import annotations

import random
import re

from pipeline.grading.criteria import normalize, parse_amounts
from pipeline.grading.memo_text import RoomIndex, _hashes, _words
from pipeline.grading.oracle import evidence_memo
from pipeline.grading.reference import claim_truth, default_budget
from pipeline.rooms.model import Criterion, Room

_SPACES = re.compile(r"\s+")
_SENTENCE = re.compile(r"(?<=[.;!?])\s+")
_WORD = re.compile(r"\w+")

# words an editor slips in; none is part of a claim signature (pipeline.grading.claim_kinds)
FILLERS = (
    "indeed", "notably", "also", "here", "further", "moreover", "in fact", "namely", "importantly",
    "as stated", "in short", "plainly", "really", "specifically", "we note",
)  # fmt: skip
SYNONYMS = {
    "shall": "will", "agreement": "contract", "upon": "on", "any": "each", "such": "that", "written": "signed",
    "prior": "advance", "party": "side", "parties": "sides", "hereunder": "under it", "thereof": "of it",
    "pursuant": "according", "company": "business", "provided": "given", "within": "inside", "all": "every",
    "obligations": "duties", "applicable": "relevant", "means": "is", "purpose": "aim", "person": "entity",
    "transaction": "deal", "acquires": "buys", "more": "over", "whether": "if", "otherwise": "else",
    "payable": "owed", "each": "every", "under": "per", "the": "this", "this": "the", "of": "for",
    "and": "plus", "may": "can", "by": "through", "to": "toward", "is": "remains", "are": "stand",
    "be": "get", "in": "within", "with": "alongside", "without": "absent", "if": "when", "that": "which",
    "date": "day", "days": "days'", "terms": "provisions", "effective": "operative", "notice": "notification",
}  # fmt: skip


# ---------------------------------------------------------------- helpers
def _issues(room: Room) -> dict[str, list[Criterion]]:
    out: dict[str, list[Criterion]] = {}
    for c in room.criteria:
        if not c.is_trap:
            out.setdefault(c.issue_id or c.criterion_id, []).append(c)
    return out


def _protected(room: Room) -> list[list[str]]:
    """The word sequences an attacker keeps as they are: the rubric's entities, phrases and paths.

    The last word of a phrase is a stem ("terminat" keeps "terminate").
    """
    out: set[tuple[str, ...]] = set()
    for c in room.criteria:
        for text in [*c.entities, *(p for g in c.any_of for p in g), *c.paths]:
            words = tuple(_WORD.findall(normalize(text)))
            if words:
                out.add(words)
    return [list(w) for w in out]


def _kept(tokens: list[str], keep: list[list[str]]) -> list[int]:
    """Per token, the id of the protected span it lies in (-1: none); numbers and paths are spans of their own."""
    flat: list[tuple[str, int]] = []  # (word, token index)
    for i, tok in enumerate(tokens):
        flat += [(w, i) for w in _WORD.findall(normalize(tok))]
    span = [-1] * len(tokens)
    next_id = 0
    for i, tok in enumerate(tokens):
        if any(ch.isdigit() for ch in tok) or "/" in tok:
            span[i] = next_id
            next_id += 1
    first: dict[str, list[list[str]]] = {}  # phrases of two words or more, by their first word
    stems = sorted({w[0] for w in keep if len(w) == 1})
    for words in keep:
        if len(words) > 1:
            first.setdefault(words[0], []).append(words)
    for k, (word, _) in enumerate(flat):
        for words in first.get(word, []) + [[st] for st in stems if word.startswith(st)]:
            n = len(words)
            if k + n > len(flat):
                continue
            got = [flat[k + j][0] for j in range(n)]
            if got[:-1] == words[:-1] and got[-1].startswith(words[-1]):
                ids = {span[flat[k + j][1]] for j in range(n)} - {-1}
                sid = min(ids) if ids else next_id
                next_id += 1
                for j in range(n):
                    span[flat[k + j][1]] = sid
    return span


def perturb(text: str, rng: random.Random, rate: float, keep: list[list[str]]) -> str:
    """``text`` with small edits: about ``rate`` of its words changed, never 8 words in a row unchanged
    (but inside a protected span).

    Inserted fillers, dropped words and synonyms change the word sequence;
    case and punctuation changes are cosmetic. Protected spans (``keep``:
    entities, rubric phrases, paths; and numbers) are never changed nor split
    by an insertion.
    """
    tokens = text.split()
    span = _kept(tokens, keep)
    out: list[str] = []
    since = 0
    for i, tok in enumerate(tokens):
        core = tok.strip(".,;:()\"'").lower()
        inside = span[i] >= 0 and i > 0 and span[i - 1] == span[i]  # an insertion here splits the span
        if (rng.random() < rate or since >= 7) and not inside:
            op = rng.choice(("insert", "drop", "swap")) if span[i] < 0 else "insert"
            if op == "swap" and core not in SYNONYMS:
                op = "insert" if rng.random() < 0.5 else "drop"
            if op == "insert":
                out += [rng.choice(FILLERS), tok]
            elif op == "swap":
                out.append(tok.replace(tok.strip(".,;:()\"'"), SYNONYMS[core], 1))
            since = 0  # a drop leaves nothing: the next word is the edit's neighbour
            if op == "drop":
                continue
        else:
            out.append(tok)
            since += 1
    # cosmetic: case and punctuation
    for i, tok in enumerate(out):
        r = rng.random()
        if r < 0.06:
            out[i] = tok.upper()
        elif r < 0.12:
            out[i] = tok.lower()
        elif r < 0.16:
            out[i] = tok.rstrip(",;")
        elif r < 0.19 and tok.endswith("."):
            out[i] = tok[:-1] + ";"
    return " ".join(out)


def break_runs(text: str, index: RoomIndex, keep: list[list[str]], rng: random.Random) -> str:
    """``text`` with a filler inserted into every run of words that lies in 8 words verbatim in the room
    (the attacker checks its paste against the exact quotation rule), protected spans left whole."""
    for _ in range(20):
        tokens = text.split()
        span = _kept(tokens, keep)
        owner: list[int] = []  # token index of each word
        for i, tok in enumerate(tokens):
            owner += [i] * len(_words(tok))
        covered = index.covered(_hashes([w.group() for tok in tokens for w in _words(tok)]))
        if not covered.any():
            return text
        spots: set[int] = set()
        i = 0
        while i < len(covered):
            if not covered[i]:
                i += 1
                continue
            j = i
            while j < len(covered) and covered[j]:
                j += 1
            # a token to insert before, as near the middle of the run as the protected spans allow
            middle = owner[(i + j) // 2]
            order = sorted(range(owner[i] + 1, owner[j - 1] + 1), key=lambda t: abs(t - middle))
            spot = next((t for t in order if span[t] < 0 or span[t - 1] != span[t]), None)
            if spot is not None:
                spots.add(spot)
            i = j
        if not spots:
            return text
        text = " ".join(f"{rng.choice(FILLERS)} {tok}" if t in spots else tok for t, tok in enumerate(tokens))
    return text


def _reorder(text: str, rng: random.Random) -> str:
    sentences = _SENTENCE.split(text)
    rng.shuffle(sentences)
    return " ".join(sentences)


def _fit(paras: list[str], budget: int) -> list[str]:
    """The leading paragraphs that fit in ``budget`` words."""
    out, used = [], 0
    for p in paras:
        n = len(p.split())
        if used + n > budget:
            break
        out.append(p)
        used += n
    return out


def _money(value: float, rng: random.Random) -> str:
    """``value`` written another way: "$1.35 million", "USD 1,350,000", "$1,350k"."""
    forms = [f"USD {value:,.0f}", f"${value:,.0f}"]
    if value >= 1e6:
        forms.append(f"${value / 1e6:g} million")
    elif value >= 1e4:
        forms.append(f"${value / 1e3:g}k")
    return rng.choice(forms)


# ---------------------------------------------------------------- near copies
_SNIPPET_WORDS = 120  # a longer paragraph (a contract without blank lines) is pasted around its match


def _paragraphs(text: str) -> list[tuple[str, str]]:
    """(paragraph with its whitespace collapsed, normalised) for the document's paragraphs of 12+ words."""
    out = []
    for para in re.split(r"\n\s*\n", text):
        flat = " ".join(para.split())
        if len(flat.split()) >= 12:
            out.append((flat, normalize(flat)))
    return out


def _issue_paragraphs(
    room: Room, crits: list[Criterion], cache: dict[str, list[tuple[str, str]]]
) -> dict[str, list[str]]:
    """path -> the paragraphs of that document holding the issue's entity, evidence or amount (of a long
    paragraph, the ``_SNIPPET_WORDS`` words around the match)."""
    by_path = {d.path: d for d in room.documents}
    needles = [normalize(e) for c in crits for e in c.entities]
    needles += [normalize(c.evidence)[:60] for c in crits if c.evidence]
    amounts = [a.value for c in crits for a in c.amounts]
    out: dict[str, list[str]] = {}
    for path in dict.fromkeys(p for c in crits for p in [*c.paths, *c.evidence_paths]):
        d = by_path.get(path)
        if d is None:
            continue
        if path not in cache:
            cache[path] = _paragraphs(d.text)
        for flat, norm in cache[path]:
            at = next((norm.find(n) for n in needles if n and n in norm), -1)
            if (
                at < 0
                and amounts
                and any(abs(v - a) <= 1e-6 * a for v in parse_amounts(flat) for a in amounts)
            ):
                at = 0
            if at < 0:
                continue
            words = flat.split()
            if len(words) > _SNIPPET_WORDS:  # the match's place, in words, from its place in the text
                mid = len(norm[:at].split())
                lo = max(0, mid - _SNIPPET_WORDS // 3)
                flat = " ".join(words[lo : lo + _SNIPPET_WORDS])
            out.setdefault(path, []).append(flat)
    return out


def near_copy_memo(room: Room, rng: random.Random, rate: float | None = None) -> str:
    """The room's issue paragraphs with small edits, a next step of the attacker's own, then more room.

    ``rate``: the share of words edited at random (drawn from 0.1 to 0.2 when
    not given), on top of the edit forced before any 8th word in a row.
    """
    keep = _protected(room)
    index = RoomIndex([d.text for d in room.documents], near_copies=False)
    rate = rng.uniform(0.1, 0.2) if rate is None else rate
    budget = default_budget(room)
    paras: list[str] = []
    cache: dict[str, list[tuple[str, str]]] = {}
    for crits in _issues(room).values():
        if sum(len(p.split()) for p in paras) > budget:
            break
        found = _issue_paragraphs(room, crits, cache)
        if not found:
            continue
        text = " ".join(t for ts in found.values() for t in ts)
        if rng.random() < 0.5:
            text = _reorder(text, rng)
        # the attacker's own next step, in phrases that do not state the finding itself
        finding = {normalize(p) for c in crits if c.kind == "identify" for g in c.any_of for p in g}
        steps = [
            rng.choice([p for p in g if not any(f in normalize(p) for f in finding)] or g)
            for c in crits
            if c.kind == "next_step"
            for g in c.any_of
        ]
        entity = next((e for c in crits for e in c.entities), "")
        step = f" Next step: {' '.join(steps)} ({entity})." if steps else ""
        paras.append(
            f"{', '.join(found)}: {break_runs(perturb(text, rng, rate, keep), index, keep, rng)}{step}"
        )
    for d in rng.sample(room.documents, len(room.documents)):  # the rest of the budget: more of the room
        if sum(len(p.split()) for p in paras) > budget:
            break
        for flat, _ in cache.get(d.path) or _paragraphs(d.text):
            if len(flat.split()) >= 20:
                flat = " ".join(flat.split()[:_SNIPPET_WORDS])
                paras.append(f"{d.path}: {break_runs(perturb(flat, rng, rate, keep), index, keep, rng)}")
                break
    return "\n\n".join(_fit(paras, budget))


# ---------------------------------------------------------------- claims
def _claim_line(path: str, groups: list[list[str]], rng: random.Random) -> str:
    return f"{path}: {', '.join(rng.choice(g) for g in groups)}."


def claim_stuffing_memo(room: Room, rng: random.Random) -> str:
    """The oracle's findings, then one short claim per random (document, kind) pair to the budget's end."""
    oracle = evidence_memo(room).strip()
    budget = default_budget(room) - len(oracle.split())
    kinds = list(claim_truth(room).kinds.items())
    lines: list[str] = []
    used = 0
    while kinds and room.documents:
        d = rng.choice(room.documents)
        _, groups = rng.choice(kinds)
        line = _claim_line(d.path, groups, rng)
        used += len(line.split())
        if used > budget:
            break
        lines.append(line)
    return "\n\n".join([oracle, *lines])


def wrong_citation_memo(room: Room, rng: random.Random) -> str:
    """The oracle, each issue's documents replaced by a document that supports none of its claims."""
    truth = claim_truth(room)
    supported = set().union(*truth.supported.values()) if truth.supported else set()
    judged = truth.judged_paths
    spare = [
        d.path
        for d in room.documents
        if normalize(d.path) not in supported and (judged is None or normalize(d.path) in judged)
    ]
    every = [d.path for d in room.documents]
    swap: dict[str, str] = {}
    for crits in _issues(room).values():
        own = {p for c in crits for p in [*c.paths, *c.evidence_paths]}
        pool = [p for p in spare if p not in own] or [p for p in every if p not in own]
        for p in sorted(own):
            if pool:
                swap[p] = rng.choice(pool)
    return evidence_memo(room, cite=swap)


def repetition_memo(room: Room, rng: random.Random) -> str:
    """One true finding of the oracle, lightly edited each time, repeated to the end of the budget."""
    totals = tuple(f"{c.issue_id} " for c in room.criteria if c.kind == "total")
    # a finding, not a total: a total's line claims no finding, and repeating one pads without a claim
    paras = [p for p in evidence_memo(room).strip().split("\n\n")[1:] if not p.startswith(totals or ("\0",))]
    if not paras:
        return ""
    one = rng.choice(paras)
    keep = _protected(room)
    budget = default_budget(room)
    copies = [one] + [perturb(one, rng, 0.08, keep) for _ in range(budget // max(1, len(one.split())))]
    return "\n\n".join(_fit(copies, budget))


# ---------------------------------------------------------------- the honest control
_LEADS = [
    (re.compile(r"^The memo flags that (.*)$", re.S), ("{}", "We found that {}", "Our review shows that {}")),
    (re.compile(r"^The memo flags (.*)$", re.S), ("We note {}", "There is {}", "Note {}")),
    (re.compile(r"^The memo notes that (.*)$", re.S), ("{}", "We observe that {}")),
    (re.compile(r"^The memo notes (.*)$", re.S), ("We note {}",)),
    (re.compile(r"^The memo connects (.*)$", re.S), ("Read {}", "One must read {}")),
    (re.compile(r"^The memo recommends (.*)$", re.S), ("We recommend {}", "Next step: {}", "The buyer should weigh {}")),
    (re.compile(r"^The memo cites (.*)$", re.S), ("The source is {}", "See {}", "This rests on {}")),
    (re.compile(r"^The memo states (?:the )?(.*?) \((.*)\)\.?$", re.S), ("{} come to {}.", "We put {} at {}.")),
    (re.compile(r"^The memo (\w+)s (.*)$", re.S), ("We {} {}",)),
]  # fmt: skip


def _reword(c: Criterion, rng: random.Random) -> str:
    """The criterion's own prose, turned from a rubric line into a reviewer's sentence."""
    text = _SPACES.sub(" ", c.text.strip()).replace(" and cites that document", "")
    for pattern, forms in _LEADS:
        m = pattern.match(text)
        if m:
            groups = list(m.groups())
            if len(groups) == 2 and "come to" in forms[0]:
                amount = groups[1]
                for a in c.amounts:
                    if "$" in amount:
                        amount = re.sub(
                            r"\$[\d,.]+(?:\s?(?:million|billion))?", _money(a.value, rng), amount, count=1
                        )
                groups[1] = amount
            out = rng.choice(forms).format(*groups)
            out = out[0].upper() + out[1:]
            return out if out.endswith(".") else out + "."
    return text


def _complete(phrase: str, text: str) -> str:
    """A stem ("terminat") as the word of ``text`` it starts ("terminate"), else the phrase itself."""
    m = re.search(r"(?<!\w)" + re.escape(phrase) + r"\w*", text, re.IGNORECASE)
    return m.group() if m else phrase


def paraphrase_memo(room: Room, rng: random.Random) -> str:
    """A reviewer's memo: per issue, the rubric's findings in a reviewer's words, with the same citations.

    Sentences come from the criteria's prose (what an expert wrote the
    finding is), reworded, amounts written another way, in a random order
    after the finding itself; a phrase group the prose lacks is added as a
    short gloss, as a reviewer names the clause.
    """
    paras = [f"Diligence memo on {room.target.get('name', room.name)}: findings and recommended steps."]
    for crits in _issues(room).values():
        first = [c for c in crits if c.kind == "identify"]
        rest = [c for c in crits if c.kind != "identify"]
        rng.shuffle(rest)
        sentences = [_reword(c, rng) for c in first + rest]
        body = " ".join(sentences)
        norm = normalize(body)
        forbidden = {normalize(f) for c in crits for f in c.forbidden}
        glosses: list[str] = []
        for c in crits:
            for e in c.entities:
                if normalize(e) not in norm:
                    glosses.append(e)
            for g in c.any_of:
                if not any(normalize(p) in norm for p in g):
                    ok = [p for p in g if not any(f in normalize(p) for f in forbidden)] or g
                    glosses.append(_complete(ok[0], c.evidence or ""))
            for p in c.paths:
                if normalize(p) not in norm and normalize(p.rsplit("/", 1)[-1]) not in norm:
                    glosses.append(p)
            values = parse_amounts(body)
            for a in c.amounts:
                if not any(abs(v - a.value) <= a.value * a.tolerance for v in values):
                    glosses.append(_money(a.value, rng))
        if glosses:
            body += f" (Key terms: {'; '.join(dict.fromkeys(glosses))}.)"
        paras.append(body)
    return "\n\n".join(paras) + "\n"
