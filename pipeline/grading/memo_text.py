"""What of a memo the reference judge reads: the reading budget, quotation, negation.

Three rules, each a reader's habit:

- **Reading budget.** A reader stops after ``budget_words`` words
  (whitespace-separated); what follows is not graded (``cut_to_budget``).
- **Quotation is not analysis.** The room's text is indexed as word 8-grams
  (``RoomIndex``; lower case, dashes and underscores as spaces, words are
  ``\\w+`` runs). In each memo unit, a run of words covered by 8-grams that
  occur verbatim in the room is quoted text. Runs longer than
  ``MAX_QUOTE_WORDS`` are cut out; if what is left is still mostly copied
  (more than ``MAX_QUOTED_SHARE`` of its words, not counting a short quotation
  the memo marks with quotation marks), or fewer than ``MIN_OWN_WORDS`` words
  are left around a cut, the whole unit is quotation and satisfies nothing.
  Short cited quotes stay.
- **Negation.** "No change-of-control clause was found in X" does not claim a
  change-of-control clause. A phrase occurrence is negated when an absence cue
  ("no", "did not find", "contains no", ...) ends at most ``NEGATION_WINDOW``
  words before it in the same sentence, or an absence cue ("was not found",
  "is absent", ...) follows it in the same sentence. A cue that is itself the
  start of a phrase of the same signature ("no cap", "no notice") is part of
  the claim, not a negation. Findings that are absences by nature (a missing
  assignment agreement, a side letter not in the room) are never read as
  negated (``absence=True``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from pipeline.grading.criteria import normalize, phrase_pattern

NGRAM = 8
MAX_QUOTE_WORDS = 40
MAX_QUOTED_SHARE = 0.5
MIN_OWN_WORDS = 12  # a unit with a long quotation cut out must keep this many words of its own
NEGATION_WINDOW = 2  # words allowed between an absence cue and the phrase it negates

_WORD = re.compile(r"\w+")
_FOLD = str.maketrans({c: " " for c in "-\u2010\u2011\u2012\u2013\u2014\u2015_"})
_P = np.uint64(1_000_003)
_MARKED_QUOTE = re.compile(r'"[^"\n]{1,600}"|\u201c[^\u201d\n]{1,600}\u201d')


# ---------------------------------------------------------------- budget
def cut_to_budget(memo: str, budget_words: int) -> tuple[str, int, bool]:
    """(the memo's first ``budget_words`` words with their layout, its word count, whether it was cut)."""
    spans = [m.end() for m in re.finditer(r"\S+", memo)]
    if len(spans) <= budget_words:
        return memo, len(spans), False
    return memo[: spans[budget_words - 1]] if budget_words > 0 else "", len(spans), True


# ---------------------------------------------------------------- quotation
def _words(text: str) -> list[re.Match[str]]:
    # same length as ``text``, so match spans index the original
    return list(_WORD.finditer(text.lower().translate(_FOLD)))


def _hashes(words: list[str]) -> np.ndarray:
    return np.fromiter((hash(w) for w in words), dtype=np.int64, count=len(words)).view(np.uint64)


def _grams(word_hashes: np.ndarray) -> np.ndarray:
    m = len(word_hashes) - NGRAM + 1
    if m <= 0:
        return np.zeros(0, dtype=np.uint64)
    out = np.zeros(m, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(NGRAM):
            out = out * _P + word_hashes[j : j + m]
    return out


class RoomIndex:
    """The room's word 8-grams as a sorted array of 64-bit hashes (one per distinct 8-gram).

    Hashes use Python's per-process string hash: an index is only compared
    with memos hashed in the same process.
    """

    def __init__(self, texts: list[str]) -> None:
        parts = [
            _grams(_hashes([m.group() for m in _WORD.finditer(t.lower().translate(_FOLD))])) for t in texts
        ]
        self.grams = np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.uint64)

    def covered(self, word_hashes: np.ndarray) -> np.ndarray:
        """A bool per word: the word is inside some 8-gram that occurs verbatim in the room."""
        grams = _grams(word_hashes)
        out = np.zeros(len(word_hashes), dtype=bool)
        if not len(grams) or not len(self.grams):
            return out
        pos = np.searchsorted(self.grams, grams)
        hit = self.grams[np.minimum(pos, len(self.grams) - 1)] == grams
        for j in range(NGRAM):  # a hit at i covers words i .. i+7
            out[j : j + len(hit)] |= hit
        return out


@dataclass
class Unquoted:
    text: str  # the unit with long quotations cut out ("" when the unit is quotation)
    quoted_words: int  # words removed as quotation
    words: int  # words in the unit


def strip_quotation(unit: str, index: RoomIndex | None) -> Unquoted:
    """The unit as analysis: long verbatim runs cut out, a mostly verbatim unit dropped."""
    words = _words(unit)
    n = len(words)
    if index is None or n < NGRAM:
        return Unquoted(unit, 0, n)
    covered = index.covered(_hashes([m.group() for m in words]))
    gone = np.zeros(n, dtype=bool)
    pieces: list[str] = []
    last = i = 0
    while i < n:
        if not covered[i]:
            i += 1
            continue
        j = i
        while j < n and covered[j]:
            j += 1
        if j - i > MAX_QUOTE_WORDS:
            pieces += [unit[last : words[i].start()], " [...] "]
            last = words[j - 1].end()
            gone[i:j] = True
        i = j
    pieces.append(unit[last:])
    # words inside a short quotation the memo marks as one are cited, not passed off as its own
    marked = np.zeros(n, dtype=bool)
    starts = np.array([w.start() for w in words])
    for q in _MARKED_QUOTE.finditer(unit):
        inside = (starts >= q.start()) & (starts < q.end())
        if inside.sum() <= MAX_QUOTE_WORDS:
            marked |= inside
    left = int((~gone).sum())
    copied = int((covered & ~marked & ~gone).sum())
    if left == 0 or copied > MAX_QUOTED_SHARE * left or (gone.any() and left < MIN_OWN_WORDS):
        # nothing of the memo's own, or only a stub ("<path>: [...]") around what was cut out
        return Unquoted("", n, n)
    return Unquoted("".join(pieces), int(gone.sum()), n)


# ---------------------------------------------------------------- negation
_PREFIX_CUES = re.compile(
    r"(?:\bno|\bnone|\bnever|\bneither|\bnor|\babsence of|\black of|\black|\blacks|\bfree of|\bwithout any"
    r"|\bnot (?:contain|include|have|find|identify|locate|see|reveal|disclose)(?: any)?"
    r"|\bno (?:evidence|indication|sign) of(?: any)?)\s*$"
)
_POSTFIX_CUES = re.compile(
    r"\b(?:(?:was|were|is|are|been) not (?:found|identified|located|present|included)|not found|"
    r"none (?:was|were) found|is absent|are absent|does not exist|do not exist)\b"
)
_SENTENCE = re.compile(r"(?<=[.;!?])\s+|\n+")


def _sentences(norm: str) -> list[str]:
    return [s for s in _SENTENCE.split(norm) if s.strip()]


def _occurrences(sentence: str, phrase: str) -> list[tuple[int, int]]:
    p = normalize(phrase).strip()
    if not p or p not in sentence:
        return []
    return [m.span() for m in phrase_pattern(p, False).finditer(sentence)]


def _negated(sentence: str, start: int, end: int, own_starts: set[int]) -> bool:
    before = sentence[:start]
    m = _PREFIX_CUES.search(before.rstrip() + " " if before.strip() else "")
    if m is None:
        # allow up to NEGATION_WINDOW words between the cue and the phrase
        words = list(re.finditer(r"\S+", before))
        for k in range(1, NEGATION_WINDOW + 1):
            if len(words) <= k:
                break
            head = before[: words[-k].start()]
            m = _PREFIX_CUES.search(head.rstrip() + " " if head.strip() else "")
            if m is not None:
                break
    if m is not None:
        cue_start = m.start() + (len(m.group()) - len(m.group().lstrip()))
        if cue_start not in own_starts:
            return True
    return bool(_POSTFIX_CUES.search(sentence[end:]))


def claims_signature(norm_unit: str, groups: list[list[str]], absence: bool = False) -> bool:
    """Whether the normalised unit asserts the signature: a non-negated phrase of every group.

    Groups match across the unit's sentences, as the rubric's fields do; an
    occurrence counts unless its own sentence negates it.
    """
    if not groups:
        return False
    for group in groups:
        if not any(normalize(p).strip() in norm_unit for p in group if p.strip()):
            return False
    if absence:
        return all(any(_occurrences(norm_unit, p) for p in group) for group in groups)
    sentences = _sentences(norm_unit)
    for group in groups:
        ok = False
        for s in sentences:
            own = {a for g in groups for p in g for a, _ in _occurrences(s, p)}
            for p in group:
                if any(not _negated(s, a, b, own) for a, b in _occurrences(s, p)):
                    ok = True
                    break
            if ok:
                break
        if not ok:
            return False
    return True
