"""What of a memo the reference judge reads: the reading budget, quotation, negation.

Four rules, each a reader's habit:

- **Reading budget.** A reader stops after ``budget_words`` words
  (whitespace-separated); what follows is not graded (``cut_to_budget``).
- **Quotation is not analysis.** The room's text is indexed as word 8-grams
  (``RoomIndex``; lower case, dashes and underscores as spaces, words are
  ``\\w+`` runs). In each memo unit, a run of words covered by 8-grams that
  occur verbatim in the room is quoted text. Runs longer than
  ``MAX_QUOTE_WORDS`` are cut out; if what is left is still mostly copied
  (more than ``MAX_QUOTED_SHARE`` of its words, not counting a short quotation
  the memo marks with quotation marks: ``quotations``), or too little of the
  memo's own wording is left around a cut (``MIN_OWN_WORDS`` words, and
  ``OWN_PER_CUT_WORD`` per word cut; quotations, file paths, names and
  numbers not counted), the whole unit is quotation and satisfies nothing.
  Short cited quotes stay.
- **A near copy is a copy.** Small edits (words inserted, dropped or swapped,
  case and punctuation changed, sentences reordered) leave no 8 words
  verbatim, so each sentence of a unit is also checked on its own. Its
  wording is compared: file paths, numbers, the words of the room's names
  (entities; document titles where the memo writes one) and of the terms of
  art (the claim kinds' and the rubric's phrases, as stems) are left out, in
  the memo and in the room, since any memo must repeat them. A sentence under
  ``MIN_SENTENCE_WORDS`` words joins the next short ones. It is a near copy
  when at least ``NEAR_COPY_SHARE`` of its words appear, in order, in one
  passage of the room as long as the sentence (rapidfuzz ``fuzz.partial_ratio``
  on word sequences), or when half of it reproduces a passage densely
  (``DENSE_SOURCE_SHARE``: words inserted between copied ones do not hide the
  copy), or when that share of it lies in ``WINDOW``-word stretches that are
  near copies (two sentences run together). Candidate passages come from the
  room's word pairs: each pair of the sentence votes for the place it occurs
  (``CANDIDATE_CAP`` earliest occurrences a pair), and the two passages with
  the most votes are aligned. A near copy is cut out, however short, unless
  it is mostly a marked short quotation; the rest of that unit is then
  checked again, sentence by sentence (3 words or more), at
  ``PASTED_UNIT_SHARE``, and the unit is judged as above. A memo with near
  copies in ``PASTED_UNITS`` units and ``PASTED_SHARE`` of its units is read
  that strictly throughout (pipeline.grading.reference).
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
from rapidfuzz import fuzz
from rapidfuzz.distance import LCSseq

from pipeline.grading.criteria import norm_phrase, phrase_pattern

NGRAM = 8
MAX_QUOTE_WORDS = 40
MAX_QUOTED_SHARE = 0.5
MIN_OWN_WORDS = 12  # a unit with quotation cut out must keep this many words of its own
OWN_PER_CUT_WORD = 0.25  # ... and this many per word cut out (what is left of a long paste is leftovers)
NEAR_COPY_SHARE = 0.65  # a sentence with this share of its words in order in one room passage is a copy
PASTED_UNIT_SHARE = 0.5  # the same check on the rest of a unit in which a sentence was a near copy
# a memo with near copies in this many units, and this share of its units, is read as a paste: every unit
# at PASTED_UNIT_SHARE (pipeline.grading.reference)
PASTED_UNITS = 2
PASTED_SHARE = 1 / 3
MIN_SENTENCE_WORDS = 8  # shorter sentences join the next before the near-copy check
DENSE_MIN_WORDS = (
    12  # from this length a sentence is also a copy when half of it reproduces a passage densely
)
DENSE_SOURCE_SHARE = 0.8  # ... at least this share of the passage's words, in order
MIN_QUOTED_ASSERTION = 6  # a marked quotation this long is evidence: a finding inside it is not asserted
WINDOW = 16  # a long sentence is also checked in stretches of this many words
CANDIDATE_CAP = 32  # occurrences of one word pair that vote for a passage (the earliest in the room)
NEGATION_WINDOW = 2  # words allowed between an absence cue and the phrase it negates

_WORD = re.compile(r"\w+")
_FOLD = str.maketrans({c: " " for c in "-\u2010\u2011\u2012\u2013\u2014\u2015_"})
_P = np.uint64(1_000_003)
FILE_REF = re.compile(r"[\w./\\-]+\.(?:txt|md|pdf|docx?|html?|csv|xlsx?|json|rtf)\b", re.IGNORECASE)
_QUOTE_MARK = re.compile(r'["\u201c\u201d]')
_OPENS_BEFORE = set(" \t\n([{:;,\u2014-/")


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


def _ngrams(word_hashes: np.ndarray, n: int) -> np.ndarray:
    m = len(word_hashes) - n + 1
    if m <= 0:
        return np.zeros(0, dtype=np.uint64)
    out = np.zeros(m, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(n):
            out = out * _P + word_hashes[j : j + m]
    return out


def _grams(word_hashes: np.ndarray) -> np.ndarray:
    return _ngrams(word_hashes, NGRAM)


class RoomIndex:
    """The room's word 8-grams as a sorted array of 64-bit hashes (one per distinct 8-gram) and, for the
    near-copy check (``near_copies=False`` leaves it out), its wording: the words of each document
    without numbers, the words of ``names`` and those of ``terms`` (stems), with its word pairs sorted
    for lookup.

    Hashes use Python's per-process string hash: an index is only compared
    with memos hashed in the same process.
    """

    def __init__(
        self,
        texts: list[str],
        near_copies: bool = True,
        names: list[str] = (),
        titles: list[str] = (),
        terms: list[str] = (),
    ) -> None:
        # words of names (parties, people, permits) any memo must repeat: not evidence of copying
        self.names = np.unique(_hashes([m.group() for n in names for m in _words(n)]))
        # terms of art (the rubric's and the claim kinds' phrases: "change of control", "indemnif"): their
        # words of four letters or more, each a stem, are repeated by any memo that states a finding
        stems = sorted({w for t in terms for w in _WORD.findall(t.lower().translate(_FOLD)) if len(w) >= 4})
        self.term = re.compile("|".join(map(re.escape, stems))) if stems else None
        # document titles ("SERVICES AGREEMENT") a memo names a document by: left out where the memo writes one
        self.titles: dict[
            int, list[tuple[int, ...]]
        ] = {}  # first word -> titles (word hashes), longest first
        for t in titles:
            h = tuple(_hashes([m.group() for m in _words(t)]).tolist())
            if len(h) >= 2 and h not in self.titles.get(h[0], []):
                self.titles.setdefault(h[0], []).append(h)
        for v in self.titles.values():
            v.sort(key=len, reverse=True)
        self.title_starts = np.array(sorted(self.titles), dtype=np.uint64)
        self.near_copies = near_copies
        grams, docs, vocabulary = [], [], set()
        for t in texts:
            words = [m.group() for m in _WORD.finditer(t.lower().translate(_FOLD))]
            hashes = _hashes(words)
            grams.append(_grams(hashes))
            if near_copies:
                docs.append((words, hashes))
                vocabulary.update(words)
        # the wording only: names, numbers and terms of art left out, as in the memo
        skip = [w for w in vocabulary if self._fact(w)]
        self.skip = np.unique(np.concatenate([self.names, _hashes(skip)]))
        plain = [hashes[~np.isin(hashes, self.skip)] for _, hashes in docs]
        self.grams = np.unique(np.concatenate(grams)) if grams else np.zeros(0, dtype=np.uint64)
        self.words = np.concatenate(plain) if plain else np.zeros(0, dtype=np.uint64)
        lengths = np.array([len(w) for w in plain], dtype=np.int64)
        self.doc_end = np.cumsum(lengths)
        self.doc_start = self.doc_end - lengths
        self.pair_keys = np.zeros(0, dtype=np.uint64)
        self.pair_pos = np.zeros(0, dtype=np.int64)
        if len(self.words) > 1:
            keys = _pairs(self.words)
            inside = np.ones(len(keys), dtype=bool)
            inside[self.doc_end[:-1][self.doc_end[:-1] > 0] - 1] = False  # no pair across two documents
            pos = np.flatnonzero(inside)
            order = np.argsort(keys[pos], kind="stable")  # equal pairs stay in room order
            self.pair_keys = keys[pos][order]
            self.pair_pos = pos[order]

    def _fact(self, word: str) -> bool:
        return not word.isalpha() or (self.term is not None and self.term.match(word) is not None)

    def facts(self, words: list[re.Match[str]], word_hashes: np.ndarray) -> np.ndarray:
        """A bool per word: a number, a word of a name or of a term of art, or inside a document title the
        memo writes out."""
        out = np.isin(word_hashes, self.names) | np.array([self._fact(w.group()) for w in words], dtype=bool)
        starts = np.flatnonzero(np.isin(word_hashes, self.title_starts))
        if len(starts):
            seq = word_hashes.tolist()
            for i in starts.tolist():
                for title in self.titles[seq[i]]:
                    if tuple(seq[i : i + len(title)]) == title:
                        out[i : i + len(title)] = True
                        break
        return out

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

    def near_copy(
        self, word_hashes: np.ndarray, segments: list[tuple[int, int]], min_words: int = MIN_SENTENCE_WORDS
    ) -> list[float]:
        """Per segment ``(start, end)`` of ``word_hashes``: the share of its words found in order in a room
        passage (0 when no passage is a candidate).

        The share is that of the whole segment against its best passage or,
        when higher, the share of its words that lie in a ``WINDOW``-word
        stretch of it which is itself a near copy (a sentence pasted from two
        places, or two sentences run together, is still a copy).
        """
        out = [0.0] * len(segments)
        n = len(word_hashes)
        if not self.near_copies or n < 2 or not len(self.pair_keys):
            return out
        keys = _pairs(word_hashes)
        lo = np.searchsorted(self.pair_keys, keys, "left")
        count = np.minimum(np.searchsorted(self.pair_keys, keys, "right") - lo, CANDIDATE_CAP)
        total = int(count.sum())
        if not total:
            return out
        at = np.repeat(np.arange(n - 1), count)  # the memo pair each occurrence belongs to (sorted)
        first = np.repeat(np.cumsum(count) - count, count)
        diag = self.pair_pos[np.repeat(lo, count) + np.arange(total) - first] - at  # room start of the memo

        def share(a: int, b: int) -> float:
            m = b - a
            i, j = np.searchsorted(at, [a, b - 1])
            if m < min_words or j - i < 2:
                return 0.0
            order = np.argsort(diag[i:j], kind="stable")
            d, room_pos = diag[i:j][order], diag[i:j][order] + at[i:j][order]
            tol = max(2, m // 4)
            votes = np.searchsorted(d, d + tol, "right") - np.searchsorted(d, d - tol, "left")
            seg = word_hashes[a:b].tolist()
            best_share = 0.0
            for _ in range(2):  # the best passage, then the best one elsewhere
                best = int(np.argmax(votes))
                if votes[best] < max(2, m // 5):
                    break
                near = np.abs(d - d[best]) <= tol
                # the passage's document: where most of its votes fall; its start: their median diagonal
                doc = np.searchsorted(self.doc_end, room_pos[near], "right")
                home = int(np.bincount(doc).argmax())
                start = int(np.median(d[near][doc == home])) + a
                best_share = max(best_share, self._align(seg, start, m, tol, home))
                if best_share >= NEAR_COPY_SHARE:
                    break
                votes = np.where(np.abs(d - d[best]) <= 2 * tol + m, 0, votes)
            return best_share

        for k, (a, b) in enumerate(segments):
            out[k] = share(a, b)
            if out[k] < NEAR_COPY_SHARE and b - a >= WINDOW + WINDOW // 2:
                copied = np.zeros(b - a, dtype=bool)
                for w in sorted({*range(a, b - WINDOW + 1, WINDOW // 2), b - WINDOW}):
                    if share(w, w + WINDOW) >= NEAR_COPY_SHARE:
                        copied[w - a : w - a + WINDOW] = True
                out[k] = max(out[k], float(copied.mean()))
        return out

    def _align(self, seg: list[int], start: int, m: int, pad: int, doc: int) -> float:
        """The segment's share against the room around ``start`` in document ``doc`` (see ``near_copy``)."""
        lo = max(int(self.doc_start[doc]), start - pad)
        hi = min(int(self.doc_end[doc]), start + m + pad)
        window = self.words[lo:hi].tolist()
        if len(window) < m:  # a passage shorter than the sentence covers part of it
            return LCSseq.similarity(seg, window) / m
        share = fuzz.partial_ratio(seg, window) / 100.0
        if share < NEAR_COPY_SHARE and m >= DENSE_MIN_WORDS:
            # words inserted between the copied ones: most of the sentence in order in a passage that it
            # reproduces nearly whole is a copy however much was inserted
            same = [(o.dest_start, o.dest_end) for o in LCSseq.opcodes(seg, window) if o.tag == "equal"]
            found = sum(b - a for a, b in same)
            if same and found >= 0.5 * m and found >= DENSE_SOURCE_SHARE * (same[-1][1] - same[0][0]):
                return NEAR_COPY_SHARE
        return share


def _pairs(word_hashes: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return word_hashes[:-1] * _P + word_hashes[1:]


@dataclass
class Unquoted:
    text: str  # the unit with long quotations and near copies cut out ("" when the unit is quotation)
    quoted_words: int  # words removed as quotation
    words: int  # words in the unit
    own: str = ""  # ``text`` without file paths and quotations: what the unit asserts itself (own_text)
    near_copied: bool = False  # a sentence of it was cut out as a near copy


_BREAK = re.compile(r"[.;:!?]\s|\n")


def _segments(unit: str, words: list[re.Match[str]], keep: np.ndarray, join: bool = True) -> list[list[int]]:
    """The unit's sentences as lists of word indices (only words where ``keep``).

    A sentence of ``MIN_SENTENCE_WORDS`` words or more stands alone; shorter
    ones next to each other are joined until they reach that length (a text
    cut into fragments is still checked), never to a long one (a short
    remark of the memo's own is not cut with a quotation beside it).
    """
    sentences: list[list[int]] = []
    last = -1
    for i in np.flatnonzero(keep).tolist():
        if not sentences or _BREAK.search(unit, words[last].end(), words[i].start()):
            sentences.append([])
        sentences[-1].append(i)
        last = i
    if not join:
        return sentences
    out: list[list[int]] = []
    short: list[int] = []
    for s in sentences:
        if len(s) >= MIN_SENTENCE_WORDS:
            if short:
                out.append(short)
                short = []
            out.append(s)
        else:
            short += s
            if len(short) >= MIN_SENTENCE_WORDS:
                out.append(short)
                short = []
    if short:
        out.append(short)
    return out


def near_copy_sentences(
    unit: str,
    words: list[re.Match[str]],
    hashes: np.ndarray,
    skip: np.ndarray,
    index: RoomIndex,
    facts: np.ndarray | None = None,
    min_words: int = MIN_SENTENCE_WORDS,
    join: bool = True,
) -> list[tuple[list[int], float]]:
    """(word indices, share found in order in a room passage) per sentence of the unit, ``skip`` words
    (marked quotation, file paths) and facts (names, numbers, titles) left out; sentences under
    ``min_words`` words get share 0."""
    if not index.near_copies:
        return []
    # names and numbers (amounts, dates) are the facts a memo must repeat; the wording around them is checked
    facts = index.facts(words, hashes) if facts is None else facts
    segments = _segments(unit, words, ~skip & ~facts, join)
    flat = np.array([i for s in segments for i in s], dtype=np.int64)
    bounds, at = [], 0
    for s in segments:
        bounds.append((at, at + len(s)))
        at += len(s)
    return list(zip(segments, index.near_copy(hashes[flat], bounds, min_words), strict=True))


def strip_quotation(unit: str, index: RoomIndex | None, strict: bool = False) -> Unquoted:
    """The unit as analysis: long verbatim runs and near-copied sentences cut out, a mostly copied unit dropped.

    ``strict``: read as a unit of a memo that pastes (``PASTED_UNITS``): every sentence is checked at
    ``PASTED_UNIT_SHARE``, as the rest of a unit with a near copy always is.
    """
    words = _words(unit)
    n = len(words)
    if index is None or n < NGRAM:
        return Unquoted(unit, 0, n, own_text(unit))
    hashes = _hashes([m.group() for m in words])
    covered = index.covered(hashes)
    starts = np.array([w.start() for w in words])

    def inside(spans) -> np.ndarray:
        out = np.zeros(n, dtype=bool)
        for a, b in spans:
            out |= (starts >= a) & (starts < b)
        return out

    # words inside a short quotation the memo marks as one are cited, not passed off as its own
    quotes = quotations(unit)
    marked = np.zeros(n, dtype=bool)
    for q in quotes:
        in_q = inside([q])
        if in_q.sum() <= MAX_QUOTE_WORDS:
            marked |= in_q
    cited = inside(f.span() for f in FILE_REF.finditer(unit))  # a file path: neither copied nor own words
    gone = np.zeros(n, dtype=bool)
    i = 0
    while i < n:
        if not covered[i]:
            i += 1
            continue
        j = i
        while j < n and covered[j]:
            j += 1
        if j - i > MAX_QUOTE_WORDS:
            gone[i:j] = True
        i = j
    facts = index.facts(words, hashes) if index.near_copies else np.zeros(n, dtype=bool)

    def cut_near_copies(skip: np.ndarray, min_words: int, share_needed: float, join: bool = True) -> bool:
        hit = False
        for seg, share in near_copy_sentences(unit, words, hashes, skip, index, facts, min_words, join):
            # a sentence that is mostly a marked short quotation is a citation, not a copy
            if share >= share_needed and marked[seg].mean() < 0.5:
                gone[seg[0] : seg[-1] + 1] = True
                hit = True
        return hit

    near_copied = cut_near_copies(cited, MIN_SENTENCE_WORDS, NEAR_COPY_SHARE)
    if near_copied or strict:
        # a unit that pastes: what is left between the pasted sentences is checked again, sentence by
        # sentence, short ones (3 words or more) included, at ``PASTED_UNIT_SHARE``
        if strict:
            near_copied |= cut_near_copies(cited, MIN_SENTENCE_WORDS, PASTED_UNIT_SHARE)
        near_copied |= cut_near_copies(cited | gone, 3, PASTED_UNIT_SHARE, join=False)
    left = int((~gone).sum())
    own = int((~gone & ~marked & ~cited & ~facts).sum())  # the memo's own wording left
    copied = int((covered & ~marked & ~gone).sum())
    if (
        left == 0
        or copied > MAX_QUOTED_SHARE * left
        or (gone.any() and own < max(MIN_OWN_WORDS, OWN_PER_CUT_WORD * gone.sum()))
    ):
        # nothing of the memo's own, or only a stub ("<path>: [...]", names, dates) around what was cut out
        return Unquoted("", n, n, "", near_copied)
    runs: list[tuple[int, int]] = []  # character spans of the cut-out runs
    i = 0
    while i < n:
        if not gone[i]:
            i += 1
            continue
        j = i
        while j < n and gone[j]:
            j += 1
        runs.append((words[i].start(), words[j - 1].end()))
        i = j
    evidence = [q for q in quotes if len(_WORD.findall(unit, *q)) >= MIN_QUOTED_ASSERTION]
    evidence += [f.span() for f in FILE_REF.finditer(unit)]
    return Unquoted(
        _without(unit, runs, " [...] "), int(gone.sum()), n, _without(unit, runs + evidence, " "), near_copied
    )


def _without(text: str, spans: list[tuple[int, int]], mark: str) -> str:
    """``text`` with the character ``spans`` (may overlap) replaced by ``mark``."""
    out, last = [], 0
    for a, b in sorted(spans):
        if b <= last:
            continue
        out += [text[last : max(a, last)], mark]
        last = b
    out.append(text[last:])
    return "".join(out)


def quotations(unit: str) -> list[tuple[int, int]]:
    """The character spans of the quotations the unit marks with quotation marks, outermost only.

    A straight quote opens at the start, after a space or an opening
    bracket or colon, and closes elsewhere; curly quotes say which they are.
    A quotation inside a quotation is part of it, and one left open inside
    ("...at the end: "In addition, X may terminate..." ) ends at the first
    mark that closes anything after it. No quotation crosses a line.
    """
    spans: list[tuple[int, int]] = []
    for line in re.finditer(r"[^\n]+", unit):
        text, base = line.group(), line.start()
        opened: list[int] = []
        first_close = -1  # the first mark that closed something inside the outermost open quotation
        outer = -1  # start of the outermost quotation still open
        for m in _QUOTE_MARK.finditer(text):
            i, ch = m.start(), m.group()
            opening = ch == "\u201c" or (ch == '"' and (i == 0 or text[i - 1] in _OPENS_BEFORE))
            if opening and not (ch == '"' and opened and i + 1 < len(text) and text[i + 1] in " \t"):
                if not opened:
                    outer, first_close = i, -1
                opened.append(i)
            elif opened:
                opened.pop()
                if first_close < 0:
                    first_close = i
                if not opened:
                    spans.append((base + outer, base + i + 1))
                    outer = -1
        if opened and first_close > outer >= 0:  # an inner quotation left open: the outer one ends at the
            spans.append((base + outer, base + first_close + 1))  # first mark that closes anything
    return spans


def own_text(unit: str) -> str:
    """The unit without its file paths and its quotations of ``MIN_QUOTED_ASSERTION`` words or more: what
    it asserts in its own words (a file name or a quoted clause is evidence, not the memo's finding)."""
    spans = [q for q in quotations(unit) if len(_WORD.findall(unit, *q)) >= MIN_QUOTED_ASSERTION]
    return _without(unit, spans + [f.span() for f in FILE_REF.finditer(unit)], " ")


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
    p = norm_phrase(phrase)
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
        if not any(norm_phrase(p) in norm_unit for p in group if p.strip()):
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
