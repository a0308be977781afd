"""The rubric blocks every planted issue repeats (identify, cite, quantify, absence, connect, conflict, next step,
trap), and the room's totals.

An issue's criteria share its id, kind, key entity (the counterparty, person,
agency or permit a memo must name), the excerpt that supports them and the
document that holds it; ``Finding`` carries those so each builder states only
what differs: the criterion texts, the amounts, the next-step phrases. The
identify phrases come from the claim-kind table (pipeline.grading.claim_kinds),
the one home of the phrases that claim a kind, and so do the trap phrases of
decoys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.grading.claim_kinds import COC, identify_signature, trap_signature
from pipeline.rooms.synthetic.context import Ctx
from pipeline.rooms.synthetic.templates import money

# next-step phrase groups of the issues cured by the counterparty's consent
OBTAIN = ["obtain", "seek", "request", "secure", "get"]
CONSENT = ["consent", "waiver"]

PhraseGroups = Sequence[Sequence[str]]


def phrases(text: str) -> list[str]:
    """A phrase group written as one "; "-separated string, so a long group reads as a sentence, not a column."""
    return text.split("; ")


@dataclass(frozen=True)
class Finding:
    """One planted issue: adds its criteria to the room, in the order the builder calls them."""

    ctx: Ctx
    iid: str  # issue id, e.g. "I03"
    kind: str  # issue kind, e.g. "coc_termination"
    entity: str  # the name every criterion requires
    evidence: str  # the planted clause
    path: str  # the document that holds it

    def identify(self, text: str) -> None:
        """The memo flags the issue (in the words of its claim kind)."""
        self._add("identify", text, any_of=identify_signature(self.kind), evidence_paths=[self.path])

    def cite(self, text: str) -> None:
        """The memo cites the document that holds the clause."""
        self._add("cite", text, paths=[self.path])

    def quantify(self, text: str, amount: float, tolerance: float, evidence: str | None = None) -> None:
        """The memo states the amount at stake; ``evidence`` when another clause states it."""
        self._add(
            "quantify",
            text,
            amounts=[(amount, tolerance)],
            evidence=evidence,
            evidence_paths=[self.path],
        )

    def absence(self, text: str, any_of: PhraseGroups, evidence_paths: Sequence[str]) -> None:
        """The memo notes that a document the issue implies is not in the room."""
        self._add("absence", text, any_of=any_of, evidence_paths=evidence_paths)

    def connect(self, text: str, paths: Sequence[str], any_of: PhraseGroups = ()) -> None:
        """The memo reads two documents together (it must cite both)."""
        self._add("connect", text, any_of=any_of, paths=paths, evidence_paths=paths)

    def conflict(self, text: str, amounts: Sequence[float], paths: Sequence[str], evidence: str) -> None:
        """The memo states the figures two documents disagree on, citing both (no one document shows it)."""
        self._add(
            "conflict",
            text,
            amounts=[(a, 0.02) for a in amounts],
            paths=paths,
            evidence=evidence,
            evidence_paths=paths,
        )

    def next_step(self, text: str, any_of: PhraseGroups) -> None:
        """The memo recommends what cures or prices the issue."""
        self._add("next_step", text, any_of=any_of, evidence_paths=[self.path])

    def _add(
        self,
        kind: str,
        text: str,
        *,
        any_of: PhraseGroups = (),
        amounts: Sequence[tuple[float, float]] = (),
        paths: Sequence[str] = (),
        evidence: str | None = None,
        evidence_paths: Sequence[str] = (),
    ) -> None:
        self.ctx.crit(
            self.iid,
            self.kind,
            kind,
            text,
            entities=[self.entity],
            any_of=any_of,
            amounts=amounts,
            paths=paths,
            evidence=self.evidence if evidence is None else evidence,
            evidence_paths=evidence_paths,
        )


def trap(
    ctx: Ctx,
    did: str,
    kind: str,
    text: str,
    *,
    entity: str,
    forbidden: Sequence[str],
    evidence: str,
    evidence_paths: Sequence[str],
    amounts: Sequence[tuple[float, float]] = (),
) -> None:
    """A decoy's trap: fails a memo that flags the resolved issue without the words that resolve it."""
    ctx.crit(
        did,
        kind,
        "trap",
        text,
        entities=[entity],
        amounts=amounts,
        any_of=trap_signature(kind),
        forbidden=forbidden,
        evidence=evidence,
        evidence_paths=evidence_paths,
        trap=True,
    )


# The room's totals: what the buyer prices, summed over every open issue of a family. Only a root that
# collects its subagents' amounts across documents (and leaves out what the room shows resolved) can
# state one: no single document holds it. The words that name a total are not a claim kind's
# signature, so a total line claims no finding of its own (pipeline.grading.claim_kinds).
TOTAL_WORDS = ["total", "aggregate", "combined", "in all", "altogether", "sum of"]
TOTALS: dict[str, tuple[str, tuple[str, ...], list[str]]] = {
    # family -> (what is totalled, the issue kinds whose quantified amounts it sums, what names it)
    "total_coc_exposure": (
        "the amounts at stake on a change of control",
        ("coc_termination", "debt_coc_default", "exec_cic_payment"),
        COC,
    ),
    "total_contingent_liabilities": (
        "the contingent liabilities",
        ("pending_litigation", "tax_assessment"),
        ["contingent", "liabilit", "exposure"],
    ),
}


def add_totals(ctx: Ctx) -> None:
    """One ``total`` criterion per family with open quantified issues in two or more documents."""
    for n, (family, (what, kinds, names)) in enumerate(TOTALS.items(), 1):
        parts = [c for c in ctx.criteria if c.kind == "quantify" and c.issue_kind in kinds]
        paths = sorted({p for c in parts for p in c.evidence_paths})
        if len(parts) < 2 or len(paths) < 2:
            continue
        total = sum(c.amounts[0].value for c in parts)
        ctx.crit(
            f"T{n}",
            family,
            "total",
            f"The memo states the total of {what} across the room: {money(total)} over {len(parts)} items.",
            any_of=[TOTAL_WORDS, names],
            amounts=[(total, 0.02)],
            evidence=" | ".join(c.evidence for c in parts),
            evidence_paths=paths,
        )
