"""The room model shared by every stage: documents, rubric criteria, probes.

A room is a fictional (or imported) target company's data room. The REPL
exposes a read-only view of it (pipeline.harness.room_view); the warehouse
stores it in the rooms / documents / criteria / probes tables
(pipeline.rooms.store).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

CATEGORIES = [
    "corporate",
    "capitalization",
    "material_contracts",
    "customers",
    "suppliers",
    "financing",
    "real_estate",
    "intellectual_property",
    "employment",
    "litigation",
    "regulatory",
    "tax",
    "insurance",
    "environmental",
    "data_privacy",
    "financial_statements",
]


def category_folder(category: str) -> str:
    """Numbered top folder of a category, e.g. material_contracts -> 03_material_contracts."""
    return f"{CATEGORIES.index(category) + 1:02d}_{category}"


CRITERION_KINDS = [
    "identify",
    "cite",
    "quantify",
    "connect",
    "conflict",
    "absence",
    "total",
    "next_step",
    "trap",
]


def count_tokens(text: str) -> int:
    """Approximate token count (4 characters a token), used for budgets and room sizes.

    Deliberately tokenizer-free: rooms are sized and budgets enforced the same
    way whatever model reads them; backends count real tokens for usage.
    """
    return max(1, (len(text) + 3) // 4)


@dataclass
class Document:
    path: str  # unique in the room, '/'-separated, e.g. "03_material_contracts/customers/msa_acme.txt"
    category: str
    title: str
    text: str
    doc_kind: str = "agreement"

    @property
    def folder(self) -> str:
        return self.path.rsplit("/", 1)[0] if "/" in self.path else ""

    @property
    def n_tokens(self) -> int:
        return count_tokens(self.text)


@dataclass
class Amount:
    value: float  # in currency units, e.g. 1250000.0
    tolerance: float = 0.01  # relative tolerance


@dataclass
class Criterion:
    """One atomic pass/fail rubric item.

    ``text`` is what an LLM judge reads. The other fields drive the
    deterministic reference judge (pipeline.grading.criteria.check_criterion):
    a non-trap criterion passes when one paragraph of the memo satisfies all
    of entities / any_of phrase groups / amounts / paths and contains none of
    ``forbidden``; a trap criterion passes unless some paragraph satisfies
    its fields (i.e. the memo flags the decoy).
    """

    criterion_id: str
    kind: str
    text: str
    issue_id: str | None = None
    issue_kind: str | None = None
    is_trap: bool = False
    entities: list[str] = field(default_factory=list)  # all must appear (case-insensitive)
    any_of: list[list[str]] = field(default_factory=list)  # each group: at least one phrase must appear
    amounts: list[Amount] = field(default_factory=list)  # each must appear, any written form
    paths: list[str] = field(default_factory=list)  # each must be cited (path or file name)
    forbidden: list[str] = field(default_factory=list)  # none may appear in the paragraph
    evidence: str = ""  # the source excerpt that supports the criterion
    evidence_paths: list[str] = field(default_factory=list)

    def spec(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("criterion_id", "kind", "text", "issue_id", "issue_kind", "is_trap"):
            d.pop(k)
        return d

    @classmethod
    def from_row(cls, row: dict[str, Any], spec: dict[str, Any]) -> Criterion:
        amounts = [Amount(**a) for a in spec.get("amounts", [])]
        rest = {k: v for k, v in spec.items() if k != "amounts"}
        return cls(
            criterion_id=row["criterion_id"],
            kind=row["kind"],
            text=row["text"],
            issue_id=row.get("issue_id"),
            issue_kind=row.get("issue_kind"),
            is_trap=bool(row["is_trap"]),
            amounts=amounts,
            **rest,
        )


@dataclass
class Probe:
    probe_id: int
    path: str
    char_offset: int
    text: str


@dataclass
class Room:
    name: str
    target: dict[str, Any]  # name, industry, jurisdiction, ...
    deal: dict[str, Any]  # type, price, buyer, ...
    documents: list[Document]
    criteria: list[Criterion] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)
    source: str = "generated"
    split: str = "train"
    seed: int | None = None
    # path -> {claim kind: labelled present?} for rooms whose truth goes beyond their criteria
    # (CUAD: every category labelled Yes or No for each labelled contract); see
    # pipeline.grading.reference.claim_truth
    claim_labels: dict[str, dict[str, bool]] = field(default_factory=dict)

    @property
    def folders(self) -> list[str]:
        return sorted({d.folder for d in self.documents})

    @property
    def n_tokens(self) -> int:
        return sum(d.n_tokens for d in self.documents)

    @property
    def room_id(self) -> str:
        return self.name

    def doc(self, path: str) -> Document:
        for d in self.documents:
            if d.path == path:
                return d
        raise KeyError(path)
