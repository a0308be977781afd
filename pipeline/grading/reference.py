"""The deterministic reference judge: recall, precision and one headline per memo.

    grader = ReferenceGrader(room)          # indexes the room once
    g = grader.grade(memo)                  # MemoGrade: verdicts, recall, precision, headline

How a memo is read, in order:

1. **Reading budget.** Only the first ``budget_words`` words are read
   (default ``BUDGET_BASE + BUDGET_PER_ISSUE`` x the room's planted issues);
   the grade records the budget, the memo's length and whether it was cut.
2. **Units.** The memo is cut into paragraphs, list items and table rows
   (pipeline.grading.criteria.units).
3. **Quotation.** Text copied from the room beyond a short quotation is cut
   out of each unit, near copies included (a sentence pasted with small
   edits), and a unit that is mostly copied is dropped
   (pipeline.grading.memo_text.strip_quotation); a memo with near copies in
   several of its units is read strictly throughout. Pasted source satisfies
   no criterion and makes no claim.
4. **Repeats.** A unit nearly the same as an earlier one (``REPEAT_SHARE``)
   that adds no document, name, claim kind or amount is set aside and not
   read; one restatement of a unit is free, and each claim of every further
   one counts as a false claim (padding).
5. **Criteria.** A non-trap criterion passes when one unit holds all of its
   fields (pipeline.grading.criteria.missing) and asserts the finding: the
   phrases of its issue's identify criterion, not negated, in the unit's own
   words (not only inside a file name or a quoted clause of six words or
   more: memo_text.own_text) (identify and trap criteria assert their own
   phrases; absence criteria are exempt, an absence being their finding).
   So a citation, an amount or a next step counts only beside the finding
   it supports, never from a list of file names. A trap fails when a unit
   flags its decoy.
6. **Claims.** A unit claims a claim kind (pipeline.grading.claim_kinds) when
   its own words assert the kind's signature. A claim that cites documents
   (path or file name) is true when at least half of the documents it cites
   are ones the room supports for that kind (a planted issue of the kind, or
   a CUAD contract labelled Yes in that category); a claim that cites none is
   true when it names (entity) something the room supports. It is false
   otherwise, including a claim that cites and names nothing, or cites a
   document that does not exist. The same claim (kind, documents cited, or
   names when none) counts once however often it is made. CUAD rooms judge
   claims only about their labelled contracts (a claim that cites only the
   merger agreement, the NDA or an unlabelled contract is not counted);
   generated and imported rooms judge every document.

Scores (all in [0, 1]):

- recall = non-trap criteria passed / non-trap criteria
- precision = true claims / (true claims + false claims + traps failed),
  above chance (a reader claiming kinds at random scores 0); 1 when the memo
  makes no claim and flags no decoy
- headline = 2 * precision * recall / (precision + recall), 0 when both are 0

An empty memo has recall 0, so headline 0; a memo that claims every kind on
every document has precision near 0, so headline near 0. The known-answer
memos (pipeline.grading.known_answers, pipeline.grading.adversarial) hold the
judge to this on every kind of room.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from rapidfuzz import fuzz, process

from pipeline.grading import claim_kinds
from pipeline.grading.criteria import PreparedUnit, check_units, has_phrase, normalize, parse_amounts, units
from pipeline.grading.memo_text import (
    FILE_REF,
    MIN_SENTENCE_WORDS,
    PASTED_SHARE,
    PASTED_UNITS,
    RoomIndex,
    claims_signature,
    cut_to_budget,
    strip_quotation,
)
from pipeline.rooms.model import Criterion, Room

# 1: criteria pass rate with traps counted as criteria (no precision, quotation or budget)
# 2: recall, precision, headline; verbatim 8-gram quotation; reading budget
# 3: near copies cut (small edits no longer hide pasted text); a finding asserted outside file names and
#    quoted clauses; a claim true only when the documents it cites support it; repeated claims counted once,
#    repeated units counted false
GRADER_VERSION = 3
BUDGET_BASE = 150
BUDGET_PER_ISSUE = 100
REPEAT_SHARE = (
    0.8  # a unit this similar (word-level ratio) to an earlier one that names nothing new is a repeat
)
_WORDS = re.compile(r"\w+")
# kinds whose finding is itself a negation ("not in the data room", "never notified"); the filed side
# letter's trap looks for the same words
ABSENCE_KINDS = frozenset(
    {"missing_ip_assignment", "missing_side_letter", "unreported_breach", "decoy_side_letter_filed"}
)

Verdict = tuple[str, bool, str]


@dataclass
class MemoGrade:
    verdicts: list[Verdict]
    recall: float
    precision: float
    headline: float
    n_claims: int  # claims judged (true + false)
    n_false_claims: int
    traps_failed: int
    memo_words: int
    budget_words: int
    cut: bool
    quoted_words: int  # words dropped as quotation
    version: int = GRADER_VERSION
    false_claims: list[str] = field(default_factory=list)  # "kind @ refs", for reasons and debugging
    repeated_units: int = 0  # units set aside as near copies of an earlier unit (not in the summary row)

    def summary(self) -> dict:
        return {
            "recall": self.recall,
            "precision": self.precision,
            "headline": self.headline,
            "n_claims": self.n_claims,
            "n_false_claims": self.n_false_claims,
            "traps_failed": self.traps_failed,
            "memo_words": self.memo_words,
            "budget_words": self.budget_words,
            "cut": self.cut,
            "quoted_words": self.quoted_words,
            "grader_version": self.version,
        }


def headline(recall: float, precision: float) -> float:
    return 0.0 if recall + precision == 0 else 2 * recall * precision / (recall + precision)


def n_issues(room: Room) -> int:
    return len({c.issue_id or c.criterion_id for c in room.criteria if not c.is_trap})


def default_budget(room: Room) -> int:
    return BUDGET_BASE + BUDGET_PER_ISSUE * n_issues(room)


@dataclass
class ReadUnit:
    """One unit of the memo as written, and what the reading made of it (for the trajectory page)."""

    raw: str  # the memo's own text of this unit
    state: str  # read | repeat (a near copy of an earlier unit) | padding (a further one) | copied (all quotation)
    number: int | None = None  # 1-based among the read units: the number the verdicts name
    quoted_words: int = 0
    read_as: str = ""  # the text the judge read, when quotation was cut out of it
    prepared: PreparedUnit | None = None


@dataclass
class Reading:
    """A memo as the reference judge reads it."""

    units: list[PreparedUnit]  # what is read, in order
    repeats: list[PreparedUnit]  # units set aside as near copies of an earlier unit of the memo
    padding: list[PreparedUnit]  # those of them beyond one restatement of that unit: their claims are false
    memo_words: int
    cut: bool  # the memo ran past the reading budget
    quoted_words: int  # words cut out as quotation or near copy
    # normalised unit -> its own words (memo_text.own_text): a finding is asserted there, not by a file
    # name or inside a quoted clause
    asserting: dict[str, str] = field(default_factory=dict)
    trail: list[ReadUnit] = field(default_factory=list)  # every unit within the budget, in the memo's order

    def says(self, norm: str) -> str:
        return self.asserting.get(norm, norm)


@dataclass
class ClaimTruth:
    """What the room supports: per claim kind, the refs (paths, entities) a true claim cites."""

    kinds: dict[str, list[list[str]]]
    supported: dict[str, set[str]]  # kind -> normalised paths and entities that make the claim true
    judged_paths: set[str] | None  # normalised paths whose claims are judged; None = every document
    entities: set[str]  # every entity worth looking for (supported ones and decoys')
    absence: set[str] = field(default_factory=set)  # kinds that assert an absence (never negated)
    chance: dict[str, float] = field(default_factory=dict)  # kind -> share of judged documents it is true of

    def with_chance(self, paths: list[str]) -> ClaimTruth:
        judged = self.judged_paths if self.judged_paths is not None else {normalize(p) for p in paths}
        if judged:
            self.chance = {k: len(self.supported.get(k, set()) & judged) / len(judged) for k in self.kinds}
        return self


def _issue_groups(room: Room) -> dict[str, list[Criterion]]:
    out: dict[str, list[Criterion]] = defaultdict(list)
    for c in room.criteria:
        out[c.issue_id or c.criterion_id].append(c)
    return out


def claim_truth(room: Room) -> ClaimTruth:
    """The claim kinds of the room and what supports each (see the module docstring)."""
    if room.source == "cuad" and room.claim_labels:
        kinds = claim_kinds.cuad_kinds()
        supported: dict[str, set[str]] = defaultdict(set)
        for path, labels in room.claim_labels.items():
            for kind, present in labels.items():
                if present:
                    supported[kind].add(normalize(path))
        # categories that share a synonym ("non-solicitation" of customers and of employees)
        # cannot be told apart by a reader: a claim of one is true where either is labelled Yes
        labelled_yes = {k: set(v) for k, v in supported.items()}
        for k, groups in kinds.items():
            for k2, groups2 in kinds.items():
                if k != k2 and set(groups[0]) & set(groups2[0]):
                    supported[k] |= labelled_yes.get(k2, set())
        judged = {normalize(p) for p in room.claim_labels}
        return ClaimTruth(kinds, dict(supported), judged, set()).with_chance(list(room.claim_labels))
    if room.source == "generated":
        kinds = claim_kinds.GENERATED
        to_kind = claim_kinds.generated_claim_kind
        absence = set(ABSENCE_KINDS)
    else:  # imported rubric files: the identify phrase groups of each issue kind are its signature
        kinds = {}
        for c in room.criteria:
            if c.kind in ("identify", "trap") and c.issue_kind and c.any_of:
                kinds.setdefault(c.issue_kind, c.any_of)
        absence = set()

        def to_kind(k: str) -> str:
            return k

    supported = defaultdict(set)
    entities: set[str] = set()
    for crits in _issue_groups(room).values():
        refs = {normalize(p) for c in crits for p in [*c.paths, *c.evidence_paths]}
        refs |= {normalize(e) for c in crits for e in c.entities}
        entities |= {e for c in crits for e in c.entities}
        if all(c.is_trap for c in crits):
            continue
        if any(c.kind == "total" for c in crits):
            continue  # a total supports no claim of its own: each part is supported by its own issue
        issue_kinds = {to_kind(c.issue_kind) for c in crits if c.issue_kind}
        # A paragraph that reports this issue and its fix also asserts every kind that the issue's
        # own language asserts: its clause and its criteria's phrases ("may terminate on a change
        # of control" + "obtain consent" is also a change-of-control consent finding).
        vocabulary = " ".join(
            [normalize(c.evidence) for c in crits]
            + [normalize(p) for c in crits for g in c.any_of for p in g]
        )
        issue_kinds |= {
            k for k, groups in kinds.items() if all(any(has_phrase(vocabulary, p) for p in g) for g in groups)
        }
        for k in issue_kinds:
            supported[k] |= refs
    truth = ClaimTruth(dict(kinds), dict(supported), None, entities, absence)
    return truth.with_chance([d.path for d in room.documents])


class ReferenceGrader:
    """Grades memos on one room; builds the room's quotation index and claim truth once."""

    def __init__(
        self,
        room: Room,
        budget_words: int | None = None,
        index: RoomIndex | None = None,
        near_copies: bool = True,
    ) -> None:
        """``near_copies=False``: only verbatim 8-grams count as copied (grader version 2's reading)."""
        self.room = room
        self.criteria = list(room.criteria)
        self.budget_words = budget_words or default_budget(room)
        has_text = any(d.text for d in room.documents)
        self.truth = claim_truth(room)
        self.index = (
            index
            if index is not None
            else (
                RoomIndex(
                    [d.text for d in room.documents],
                    near_copies,
                    names=sorted(self.truth.entities),
                    titles=[d.title for d in room.documents],
                    terms=sorted(
                        {p for groups in self.truth.kinds.values() for g in groups for p in g}
                        | {p for c in room.criteria for g in c.any_of for p in g}
                    ),
                )
                if has_text
                else None
            )
        )
        self.by_name: dict[str, set[str]] = defaultdict(set)
        for d in room.documents:
            self.by_name[normalize(d.path.rsplit("/", 1)[-1])].add(normalize(d.path))
        # issue -> the identify phrase groups: every other criterion of the issue must sit in a unit
        # that asserts the finding, so a bare list of file names or generic next steps earns nothing
        self.finding: dict[str, list[list[str]]] = {
            c.issue_id: c.any_of for c in self.criteria if c.kind == "identify" and c.issue_id and c.any_of
        }

    # ------------------------------------------------------------ reading
    def read(self, memo: str) -> Reading:
        """The memo as read: the budget applied, quotation and near copies cut out, repeats set aside.

        A unit is a repeat when its own words (memo_text.own_text) are at
        least ``REPEAT_SHARE`` alike (word-level ratio) to an earlier unit's and
        it adds nothing to it: no document, name, claim kind or amount the
        earlier unit lacks. One restatement of a unit is set aside; every
        further one is padding as well.
        """
        text, n_words, cut = cut_to_budget(memo or "", self.budget_words)
        reading = Reading([], [], [], n_words, cut, 0, {})
        seen: list[list[str]] = []  # own words of each unit read so far
        facts: list[tuple[set[str], set[float], str]] = []  # its references, amounts, own text
        restated: dict[int, int] = defaultdict(int)  # unit read -> repeats of it so far
        raws = units(text)
        read = [strip_quotation(u, self.index) for u in raws]
        pasted = sum(uq.near_copied for uq in read)
        if pasted >= PASTED_UNITS and pasted >= PASTED_SHARE * len(read):  # a memo that pastes: read strictly
            read = [strip_quotation(u, self.index, strict=True) for u in raws]
        for raw, uq in zip(raws, read, strict=True):
            reading.quoted_words += uq.quoted_words
            trail = ReadUnit(raw, "copied", quoted_words=uq.quoted_words)
            reading.trail.append(trail)
            if not uq.text.strip():
                continue
            norm = normalize(uq.text)
            prepared = (uq.text, norm, parse_amounts(uq.text))
            trail.prepared, trail.read_as = prepared, uq.text if uq.quoted_words else ""
            own = reading.asserting[norm] = normalize(uq.own)
            words = _WORDS.findall(own)
            mine = (self._refs(uq.text, norm), {round(v, 2) for v in prepared[2]}, own)
            if len(words) >= MIN_SENTENCE_WORDS and seen:
                alike = process.extract(
                    words, seen, scorer=fuzz.ratio, score_cutoff=100 * REPEAT_SHARE, limit=None
                )
                first = next((k for _, _, k in alike if self._adds_nothing(mine, facts[k])), None)
                if first is not None:
                    reading.repeats.append(prepared)
                    restated[first] += 1
                    trail.state = "repeat"
                    if restated[first] > 1:
                        reading.padding.append(prepared)
                        trail.state = "padding"
                    continue
            reading.units.append(prepared)
            trail.state, trail.number = "read", len(reading.units)
            seen.append(words)
            facts.append(mine)
        return reading

    def _adds_nothing(self, unit, earlier) -> bool:
        (refs, amounts, own), (refs0, amounts0, own0) = unit, earlier
        return refs <= refs0 and amounts <= amounts0 and self._kinds(own) <= self._kinds(own0)

    def _kinds(self, own: str) -> set[str]:
        """The claim kinds a unit's own text asserts."""
        truth = self.truth
        return {k for k, g in truth.kinds.items() if claims_signature(own, g, absence=k in truth.absence)}

    def _cited(self, unit: str) -> set[frozenset[str]]:
        """The documents the unit cites: per file reference, the room paths it names (empty: none)."""
        out: set[frozenset[str]] = set()
        for m in FILE_REF.finditer(unit):
            ref = normalize(m.group().strip("./\\"))
            name = ref.rsplit("/", 1)[-1]
            out.add(frozenset(p for p in self.by_name.get(name, ()) if p.endswith(ref) or ref == name))
        return out

    def _named(self, norm: str) -> set[str]:
        return {normalize(e) for e in self.truth.entities if has_phrase(norm, e, whole_word=True)}

    def _refs(self, unit: str, norm: str) -> set[str]:
        return set().union(*self._cited(unit)) | self._named(norm)

    # ------------------------------------------------------------ grading
    def _criterion(self, c: Criterion, reading: Reading) -> tuple[bool, str]:
        if c.kind in ("identify", "trap"):
            asserted = c.any_of
        elif c.kind == "absence":
            asserted = []
        else:
            asserted = self.finding.get(c.issue_id or "", [])
        absence = (c.issue_kind or "") in ABSENCE_KINDS or c.kind == "absence"

        def also(norm: str) -> list[str]:
            if asserted and not claims_signature(reading.says(norm), asserted, absence=absence):
                return ["the finding itself, asserted and not negated"]
            return []

        return check_units(c, reading.units, also, nothing="nothing to read (empty, or only quotation)")

    def _claims(self, reading: Reading) -> tuple[int, list[str], float]:
        """(true claims, false claims, true claims expected of a reader who claims at random).

        A claim made twice (same kind, same documents cited, or same names when
        it cites none) counts once; a claim in a padding unit counts as false.
        """
        truth = self.truth
        n_true, false, expected = 0, [], 0.0
        seen: set[tuple[str, frozenset[str]]] = set()
        for repeat, (u, norm, _) in [(False, p) for p in reading.units] + [
            (True, p) for p in reading.padding
        ]:
            cited = named = None
            for kind, groups in truth.kinds.items():
                if not claims_signature(reading.says(norm), groups, absence=kind in truth.absence):
                    continue
                if cited is None:
                    cited, named = self._cited(u), self._named(norm)
                refs = set().union(*cited) | named
                supported = truth.supported.get(kind, set())
                if cited:  # the documents cited must support it: at least half of them
                    true = 2 * sum(1 for c in cited if c & supported) >= len(cited)
                else:
                    true = bool(named & supported)
                if not (true or truth.judged_paths is None or not refs or refs & truth.judged_paths):
                    continue  # about documents the room has no labels for: not judged
                key = (kind, frozenset().union(*cited) if cited else frozenset(named))
                if repeat:
                    false.append(f"repeated {kind} @ {', '.join(sorted(refs)) or 'nothing cited'}")
                elif key in seen:
                    continue
                elif true:
                    n_true += 1
                else:
                    false.append(f"{kind} @ {', '.join(sorted(refs)) or 'nothing cited'}")
                seen.add(key)
                expected += truth.chance.get(kind, 0.0)
        return n_true, false, expected

    def claims(self, unit: ReadUnit, reading: Reading) -> tuple[int, list[str]]:
        """(true claims, false claims as 'kind @ refs') of one unit of ``reading``, as ``grade`` judges them
        (a padding unit's claims are false). The trajectory page (pipeline.report.memo_marks) asks it."""
        if unit.prepared is None or unit.state not in ("read", "padding"):
            return 0, []
        padding = unit.state == "padding"
        one = Reading(
            [] if padding else [unit.prepared], [], [unit.prepared] if padding else [], 0, False, 0,
            reading.asserting,
        )  # fmt: skip
        n_true, false, _ = self._claims(one)
        return n_true, false

    def readable(self, memo: str) -> str:
        """The memo as this grader reads it (budget, quotation and repeats cut out): what an LLM judge is shown."""
        return "\n\n".join(u for u, _, _ in self.read(memo).units)

    def grade(self, memo: str) -> MemoGrade:
        reading = self.read(memo)
        verdicts = [(c.criterion_id, *self._criterion(c, reading)) for c in self.criteria]
        return self.score(verdicts, reading)

    def grade_with(self, memo: str, verdicts: list[tuple[str, bool | None, str]]) -> MemoGrade:
        """Scores for another judge's criterion verdicts on ``memo``; claims are read as ``grade`` reads them."""
        return self.score(verdicts, self.read(memo))

    def score(self, verdicts, reading: Reading) -> MemoGrade:
        """Recall, precision and headline from criterion verdicts (None = ungraded, left out) and claims."""
        trap = {c.criterion_id: c.is_trap for c in self.criteria}
        issue = [v[1] for v in verdicts if v[1] is not None and not trap.get(v[0], False)]
        traps_failed = sum(1 for v in verdicts if v[1] is False and trap.get(v[0], False))
        n_true, false, expected = self._claims(reading)
        recall = sum(issue) / len(issue) if issue else 0.0
        judged = n_true + len(false) + traps_failed
        # precision above chance: a reader who claims kinds at random is right `expected` times
        precision = max(0.0, (n_true - expected) / (judged - expected)) if judged - expected > 1e-9 else 1.0
        return MemoGrade(
            verdicts=list(verdicts),
            recall=recall,
            precision=precision,
            headline=headline(recall, precision),
            n_claims=n_true + len(false),
            n_false_claims=len(false),
            traps_failed=traps_failed,
            memo_words=reading.memo_words,
            budget_words=self.budget_words,
            cut=reading.cut,
            quoted_words=reading.quoted_words,
            false_claims=false,
            repeated_units=len(reading.repeats),
        )
