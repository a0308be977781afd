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
   out of each unit, and a unit that is mostly copied is dropped
   (pipeline.grading.memo_text.strip_quotation). Pasted source satisfies no
   criterion and makes no claim.
4. **Criteria.** A non-trap criterion passes when one unit holds all of its
   fields (pipeline.grading.criteria.missing) and asserts the finding: the
   phrases of its issue's identify criterion, not negated (identify and trap
   criteria assert their own phrases; absence criteria are exempt, an absence
   being their finding). So a citation, an amount or a next step counts only
   beside the finding it supports, never from a list of file names. A trap
   fails when a unit flags its decoy.
5. **Claims.** A unit claims a claim kind (pipeline.grading.claim_kinds) when
   it asserts the kind's signature. The claim is true when the unit cites
   (path or file name) or names (entity) something the room supports for that
   kind: a planted issue of the kind, or a CUAD contract labelled Yes in that
   category. It is false otherwise, including a claim that cites nothing.
   CUAD rooms judge claims only about their labelled contracts (a claim that
   cites only the merger agreement, the NDA or an unlabelled contract is not
   counted); generated and imported rooms judge every document.

Scores (all in [0, 1]):

- recall = non-trap criteria passed / non-trap criteria
- precision = true claims / (true claims + false claims + traps failed);
  1 when the memo makes no claim and flags no decoy
- headline = 2 * precision * recall / (precision + recall), 0 when both are 0

An empty memo has recall 0, so headline 0; a memo that claims every kind on
every document has precision near 0, so headline near 0.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from pipeline.grading import claim_kinds
from pipeline.grading.criteria import PreparedUnit, check_units, has_phrase, normalize, parse_amounts, units
from pipeline.grading.memo_text import RoomIndex, claims_signature, cut_to_budget, strip_quotation
from pipeline.rooms.model import Criterion, Room

GRADER_VERSION = 2  # 1: criteria pass rate with traps counted as criteria (no precision, quotation or budget)
BUDGET_BASE = 150
BUDGET_PER_ISSUE = 100
ABSENCE_KINDS = frozenset({"missing_ip_assignment", "missing_side_letter", "unreported_breach"})
_FILE_REF = re.compile(r"[\w./\\-]+\.(?:txt|md|pdf|docx?|html?|csv|xlsx?|json|rtf)\b", re.IGNORECASE)

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

    def __init__(self, room: Room, budget_words: int | None = None, index: RoomIndex | None = None) -> None:
        self.room = room
        self.criteria = list(room.criteria)
        self.budget_words = budget_words or default_budget(room)
        has_text = any(d.text for d in room.documents)
        self.index = (
            index
            if index is not None
            else (RoomIndex([d.text for d in room.documents]) if has_text else None)
        )
        self.truth = claim_truth(room)
        self.by_name: dict[str, set[str]] = defaultdict(set)
        for d in room.documents:
            self.by_name[normalize(d.path.rsplit("/", 1)[-1])].add(normalize(d.path))
        # issue -> the identify phrase groups: every other criterion of the issue must sit in a unit
        # that asserts the finding, so a bare list of file names or generic next steps earns nothing
        self.finding: dict[str, list[list[str]]] = {
            c.issue_id: c.any_of for c in self.criteria if c.kind == "identify" and c.issue_id and c.any_of
        }

    # ------------------------------------------------------------ reading
    def read(self, memo: str) -> tuple[list[PreparedUnit], int, bool, int]:
        """(prepared units as (text, normalised, amounts), memo words, cut, quoted words)."""
        text, n_words, cut = cut_to_budget(memo or "", self.budget_words)
        prepared = []
        quoted = 0
        for u in units(text):
            uq = strip_quotation(u, self.index)
            quoted += uq.quoted_words
            if uq.text.strip():
                prepared.append((uq.text, normalize(uq.text), parse_amounts(uq.text)))
        return prepared, n_words, cut, quoted

    def _refs(self, unit: str, norm: str) -> set[str]:
        refs: set[str] = set()
        for m in _FILE_REF.finditer(unit):
            ref = normalize(m.group().strip("./\\"))
            name = ref.rsplit("/", 1)[-1]
            refs |= {p for p in self.by_name.get(name, ()) if p.endswith(ref) or ref == name}
        refs |= {normalize(e) for e in self.truth.entities if has_phrase(norm, e, whole_word=True)}
        return refs

    # ------------------------------------------------------------ grading
    def _criterion(self, c: Criterion, prepared) -> tuple[bool, str]:
        if c.kind in ("identify", "trap"):
            asserted = c.any_of
        elif c.kind == "absence":
            asserted = []
        else:
            asserted = self.finding.get(c.issue_id or "", [])
        absence = (c.issue_kind or "") in ABSENCE_KINDS or c.kind == "absence"

        def also(norm: str) -> list[str]:
            if asserted and not claims_signature(norm, asserted, absence=absence):
                return ["the finding itself, asserted and not negated"]
            return []

        return check_units(c, prepared, also, nothing="nothing to read (empty, or only quotation)")

    def _claims(self, prepared) -> tuple[int, list[str], float]:
        """(true claims, false claims, true claims expected of a reader who claims at random)."""
        truth = self.truth
        n_true, false, expected = 0, [], 0.0
        for u, norm, _ in prepared:
            refs = None
            for kind, groups in truth.kinds.items():
                if not claims_signature(norm, groups, absence=kind in truth.absence):
                    continue
                refs = self._refs(u, norm) if refs is None else refs
                if refs & truth.supported.get(kind, set()):
                    n_true += 1
                elif truth.judged_paths is None or not refs or refs & truth.judged_paths:
                    false.append(f"{kind} @ {', '.join(sorted(refs)) or 'nothing cited'}")
                else:
                    continue  # about documents the room has no labels for: not judged
                expected += truth.chance.get(kind, 0.0)
        return n_true, false, expected

    def claims(self, prepared) -> tuple[int, list[str]]:
        """(true claims, false claims as 'kind @ refs') of prepared units, as ``grade`` judges them.

        The trajectory page (pipeline.report.memo_marks) asks it one unit at a time.
        """
        n_true, false, _ = self._claims(prepared)
        return n_true, false

    def readable(self, memo: str) -> str:
        """The memo as this grader reads it (budget, quotation cut out): what an LLM judge is shown."""
        return "\n\n".join(u for u, _, _ in self.read(memo)[0])

    def grade(self, memo: str) -> MemoGrade:
        prepared, n_words, cut, quoted = self.read(memo)
        verdicts = [(c.criterion_id, *self._criterion(c, prepared)) for c in self.criteria]
        return self.score(verdicts, prepared, n_words, cut, quoted)

    def grade_with(self, memo: str, verdicts: list[tuple[str, bool | None, str]]) -> MemoGrade:
        """Scores for another judge's criterion verdicts on ``memo``; claims are read as ``grade`` reads them."""
        prepared, n_words, cut, quoted = self.read(memo)
        return self.score(verdicts, prepared, n_words, cut, quoted)

    def score(self, verdicts, prepared, n_words: int, cut: bool, quoted: int) -> MemoGrade:
        """Recall, precision and headline from criterion verdicts (None = ungraded, left out) and claims."""
        trap = {c.criterion_id: c.is_trap for c in self.criteria}
        issue = [v[1] for v in verdicts if v[1] is not None and not trap.get(v[0], False)]
        traps_failed = sum(1 for v in verdicts if v[1] is False and trap.get(v[0], False))
        n_true, false, expected = self._claims(prepared)
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
            memo_words=n_words,
            budget_words=self.budget_words,
            cut=cut,
            quoted_words=quoted,
            false_claims=false,
        )
