"""Data rooms built from expert-annotated public contracts (CUAD, MAUD, ContractNLI).

    rooms = build_cuad_rooms("../shared/data", n_rooms=4, contracts_per_room=40, seed=0)

Each room is a fictional target whose material contracts are real CUAD v1
contracts (public SEC EDGAR exhibits), filed into folders by contract type
(``03_material_contracts/distribution/...``, ``08_intellectual_property/
licenses/...``; the folder number is the category's 1-based position in
pipeline.rooms.model.CATEGORIES), plus a MAUD merger agreement
(``00_deal/merger_agreement.txt``) and a ContractNLI NDA (``00_deal/nda.txt``).

The rubric comes from the CUAD expert labels, not from anything this project
wrote:
- identify: for every contract labelled Yes in a diligence category
  (``CATEGORIES`` below) the memo must name the category (any synonym) and
  cite the contract's path; evidence is the expert excerpt as it stands in
  the contract text.
- trap: a contract labelled No in a category while labelled Yes in a
  neighbouring one that a careless reader conflates with it (no change of
  control but an anti-assignment clause; capped but not uncapped
  liability) — a memo that flags the absent one fails.

Rooms draw disjoint contracts from one seeded shuffle, so room i is the same
whatever n_rooms is, and held-out rooms share no contract with training rooms.
The split is a hash of the room name (pipeline.rooms.split.split_for).
Attribution: CUAD, MAUD and ContractNLI are CC BY 4.0 (The Atticus Project;
the ContractNLI authors); every room's ``deal["sources"]`` says so.
"""

from __future__ import annotations

import ast
import csv
import json
import random
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.rooms.model import Criterion, Document, Room, category_folder
from pipeline.rooms.probes import sample_probes
from pipeline.rooms.split import split_for
from pipeline.rooms.store import RoomError

MAX_CONTRACTS_PER_ROOM = 120  # about 2M tokens of CUAD text; bigger rooms belong to the generator
EVIDENCE_SEP = "\n[...]\n"  # between excerpts (or <omitted> pieces) in Criterion.evidence
SOURCES = (
    "Contracts: CUAD v1 (The Atticus Project, CC BY 4.0); merger agreement: MAUD (The Atticus Project, "
    "CC BY 4.0); NDA: ContractNLI (Koreeda and Manning, CC BY 4.0). Underlying texts are public SEC EDGAR "
    "exhibits; see cuad/CUAD_v1_README.txt. The target company is fictional."
)


@dataclass(frozen=True)
class Category:
    column: str  # the master_clauses.csv column holding the excerpts
    slug: str
    label: str  # as written in criterion texts
    synonyms: tuple[str, ...]  # any one, lower-case, satisfies the criterion's any_of group


CATEGORIES_CUAD: list[Category] = [
    Category(
        "Change of Control",
        "change_of_control",
        "change-of-control",
        ("change of control", "change in control", "change-of-control", "change-in-control"),
    ),
    Category(
        "Anti-Assignment",
        "anti_assignment",
        "anti-assignment",
        # Not bare "assignment": "IP ownership assignment" is another category.
        (
            "anti-assignment",
            "assignment restriction",
            "restriction on assignment",
            "restrictions on assignment",
            "prohibition on assignment",
            "prohibits assignment",
            "assignment clause",
            "assignment provision",
            "assignment requires",
            "assignment without",
            "consent to assign",
            "consent to any assignment",
            "consent to the assignment",
            "consent to assignment",
            "not assign",
            "not be assigned",
            "non-assignable",
            "not assignable",
        ),
    ),
    Category(
        "Termination for Convenience",
        "termination_for_convenience",
        "termination-for-convenience",
        (
            "termination for convenience",
            "terminate for convenience",
            "terminate at will",
            "terminate without cause",
            "termination without cause",
            "for any reason or no reason",
        ),
    ),
    Category(
        "Exclusivity",
        "exclusivity",
        "exclusivity",
        # Not bare "exclusive": it is inside "non-exclusive", which says the opposite.
        (
            "exclusivity",
            "exclusively",
            "exclusive dealing",
            "exclusive basis",
            "exclusive distribut",
            "exclusive right to",
            "sole and exclusive",
            "sole supplier",
            "sole source",
        ),
    ),
    Category(
        "Non-Compete",
        "non_compete",
        "non-compete",
        ("non-compete", "noncompete", "non compete", "not compete", "non-competition", "noncompetition"),
    ),
    Category(
        "No-Solicit of Customers",
        "no_solicit_customers",
        "customer non-solicitation",
        ("non-solicit", "nonsolicit", "no-solicit", "not solicit", "non-solicitation", "solicitation"),
    ),
    Category(
        "No-Solicit of Employees",
        "no_solicit_employees",
        "employee non-solicitation",
        (
            "non-solicit",
            "nonsolicit",
            "no-solicit",
            "not solicit",
            "non-solicitation",
            "solicitation",
            "no-hire",
            "not hire",
        ),
    ),
    Category(
        "Most Favored Nation",
        "most_favored_nation",
        "most-favored-nation",
        ("most favored", "most favoured", "most-favored", "most-favoured", "mfn"),
    ),
    Category(
        "Rofr/Rofo/Rofn",
        "rofr_rofo_rofn",
        "right of first refusal/offer/negotiation",
        (
            "right of first refusal",
            "right of first offer",
            "right of first negotiation",
            "rofr",
            "rofo",
            "rofn",
            "first refusal",
        ),
    ),
    Category(
        "Cap on Liability",
        "cap_on_liability",
        "liability cap",
        (
            "cap on liability",
            "liability cap",
            "limitation of liability",
            "limitation on liability",
            "liability is capped",
            "capped at",
            "liability is limited",
            "limits liability",
        ),
    ),
    Category(
        "Uncapped Liability",
        "uncapped_liability",
        "uncapped liability",
        (
            "uncapped",
            "unlimited liability",
            "not capped",
            "no cap on liability",
            "no liability cap",
            "liability is unlimited",
        ),
    ),
    Category(
        "Liquidated Damages",
        "liquidated_damages",
        "liquidated damages",
        ("liquidated damages", "termination fee", "break fee", "penalty"),
    ),
    Category(
        "IP Ownership Assignment",
        "ip_ownership_assignment",
        "IP ownership assignment",
        (
            "ip ownership",
            "ownership of intellectual property",
            "ownership of ip",
            "ip assignment",
            "assignment of intellectual property",
            "assigns intellectual property",
            "intellectual property assignment",
            "work product",
            "work made for hire",
            "work for hire",
        ),
    ),
    Category(
        "Minimum Commitment",
        "minimum_commitment",
        "minimum commitment",
        (
            "minimum commitment",
            "minimum purchase",
            "minimum order",
            "minimum volume",
            "minimum quantity",
            "take-or-pay",
            "take or pay",
            "minimum annual",
            "minimum payment",
        ),
    ),
]
_BY_COLUMN = {c.column: c for c in CATEGORIES_CUAD}

# (category labelled No, neighbouring category labelled Yes): a trap on the first.
TRAPS: list[tuple[str, str]] = [
    ("Change of Control", "Anti-Assignment"),
    ("Uncapped Liability", "Cap on Liability"),
]

# Contract type (keywords in the file name, first match wins) -> (category, subfolder).
CONTRACT_TYPES: list[tuple[tuple[str, ...], str, str]] = [
    (("JOINT FILING",), "corporate", "joint_filings"),
    (
        ("CAPITAL MAINTENANCE", "LIQUIDITY MAINTENANCE", "YIELD MAINTENANCE", "ESCROW AGREEMENT"),
        "financing",
        "support_agreements",
    ),
    (
        ("NON COMPETITION", "NON-COMPETITION", "COMPETITION AGREEMENT"),
        "material_contracts",
        "restrictive_covenants",
    ),
    (("LICENSE", "LICENCE", "LICENSING", "TRADEMARK"), "intellectual_property", "licenses"),
    (("INTELLECTUAL PROPERTY",), "intellectual_property", "ip_agreements"),
    (("DISTRIBUT", "RESELLER", "DEALER", "REMARKETING"), "material_contracts", "distribution"),
    (("SUPPLY", "MANUFACTUR", "PURCHASE"), "suppliers", "supply_manufacturing"),
    (("FRANCHISE",), "material_contracts", "franchise"),
    (
        ("SPONSOR", "ENDORSE", "PROMOTION", "MARKETING", "BRANDING", "AFFILIATE", "AGENCY"),
        "material_contracts",
        "marketing",
    ),
    (
        (
            "HOSTING",
            "MAINTENANCE",
            "SUPPORT",
            "OUTSOURC",
            "SERVIC",
            "CONSULT",
            "TRANSPORT",
            "OPERATION",
            "MANAGEMENT",
        ),
        "material_contracts",
        "services",
    ),
    (
        ("ALLIANCE", "COLLABORAT", "COOPERATION", "JOINT VENTURE", "DEVELOPMENT"),
        "material_contracts",
        "collaboration",
    ),
]

_TARGET_NAMES = [
    "Aldermoor",
    "Bexley",
    "Caldera",
    "Dunmore",
    "Everly",
    "Fairhaven",
    "Granite Peak",
    "Halvorsen",
    "Ironwood",
    "Juniper",
    "Kestrel",
    "Larchmont",
    "Meridian",
    "Northgate",
    "Oakhurst",
    "Pemberton",
    "Quillon",
    "Redfern",
    "Silverlake",
    "Thornbury",
    "Valmont",
    "Westbrook",
    "Yarrow",
    "Zephyr",
]
_TARGET_SUFFIXES = ["Holdings, Inc.", "Group, Inc.", "Industries Corp.", "Technologies, Inc.", "Brands, Inc."]
_FOLD = str.maketrans(
    {
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u2018": "'",
        "\u2019": "'",
        "\u2013": "-",
        "\u2014": "-",
        "\u2011": "-",
        "\u00a0": " ",
    }
)


@dataclass
class CuadContract:
    file: str  # text file name in cuad/contracts
    text: str
    name: str  # the "Document Name" answer, e.g. "DISTRIBUTOR AGREEMENT"
    excerpts: dict[str, list[str]] = field(default_factory=dict)  # column -> expert excerpts
    answers: dict[str, str] = field(default_factory=dict)  # column -> "Yes" / "No" / ...

    def labelled_yes(self, column: str) -> bool:
        return self.answers.get(column) == "Yes" or bool(self.excerpts.get(column))

    def labelled_no(self, column: str) -> bool:
        return self.answers.get(column) == "No" and not self.excerpts.get(column)


def contract_folder(file_name: str) -> tuple[str, str]:
    """(category, folder) of a CUAD contract from the contract type in its file name."""
    upper = file_name.upper()
    for words, category, sub in CONTRACT_TYPES:
        if any(w in upper for w in words):
            return category, f"{category_folder(category)}/{sub}"
    return "material_contracts", f"{category_folder('material_contracts')}/other"


def normalise(text: str) -> str:
    """Lower case, straight quotes and dashes, single spaces: how excerpts are matched to contracts."""
    return re.sub(r"\s+", " ", text.translate(_FOLD)).strip().lower()


def locate(excerpt: str, text: str) -> list[str] | None:
    """The spans of ``text`` an expert excerpt stands for (one per ``<omitted>`` piece), or None.

    About 4% of CUAD excerpts differ from the contract in whitespace or
    quotes, or skip text marked ``<omitted>``; those are matched after
    ``normalise`` on both sides and mapped back to the exact original span.
    """
    pieces = [p.strip() for p in excerpt.split("<omitted>") if p.strip()]
    spans: list[str] = []
    mapped: tuple[str, list[int]] | None = None
    for piece in pieces:
        if piece in text:
            spans.append(piece)
            continue
        if mapped is None:
            mapped = _normalised_with_offsets(text)
        norm, offsets = mapped
        needle = normalise(piece)
        at = norm.find(needle)
        if not needle or at < 0:
            return None
        spans.append(text[offsets[at] : offsets[at + len(needle) - 1] + 1])
    return spans or None


def _normalised_with_offsets(text: str) -> tuple[str, list[int]]:
    """``normalise(text)`` plus, for each of its characters, the offset it came from in ``text``."""
    out: list[str] = []
    offsets: list[int] = []
    space = True  # drops leading whitespace, as strip() does
    for i, ch in enumerate(text.translate(_FOLD)):
        if ch.isspace():
            if not space:
                out.append(" ")
                offsets.append(i)
            space = True
            continue
        low = ch.lower()
        out.append(low if len(low) == 1 else ch)  # keep offsets 1:1
        offsets.append(i)
        space = False
    return "".join(out), offsets


def load_cuad(corpus: str | Path) -> tuple[list[CuadContract], list[CuadContract]]:
    """(labelled contracts, unlabelled contracts) of ``<corpus>/cuad``, sorted by file name."""
    root = Path(corpus) / "cuad"
    table = root / "master_clauses.csv"
    if not table.is_file():
        raise RoomError(f"{table}: CUAD label table not found (corpus root is the folder holding cuad/)")
    # Excerpt cells run to hundreds of kilobytes, past csv's 128 KiB default.
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    texts = {p.name: p for p in sorted((root / "contracts").glob("*.txt"))}
    labelled: list[CuadContract] = []
    with table.open(encoding="utf-8", newline="") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            file = re.sub(r"\.pdf$", "", row["Filename"], flags=re.I) + ".txt"
            if file not in texts:
                continue  # the shared corpus is a subset of CUAD
            c = CuadContract(
                file=file,
                text=texts.pop(file).read_text(encoding="utf-8"),
                name=(row.get("Document Name-Answer") or "").strip() or Path(file).stem,
            )
            for cat in CATEGORIES_CUAD:
                try:
                    excerpts = ast.literal_eval(row[cat.column] or "[]")
                except (ValueError, SyntaxError, KeyError) as e:
                    raise RoomError(
                        f"{table}: line {line}: field {cat.column!r}: not a list of excerpts ({e})"
                    ) from None
                c.excerpts[cat.column] = [str(x) for x in excerpts]
                c.answers[cat.column] = (row.get(f"{cat.column}-Answer") or "").strip()
            labelled.append(c)
    unlabelled = [
        CuadContract(file=name, text=p.read_text(encoding="utf-8"), name=Path(name).stem)
        for name, p in texts.items()
    ]
    return labelled, unlabelled


def _deal_documents(corpus: Path, folder: str) -> list[Path]:
    docs = sorted(p for p in (corpus / folder / "documents").glob("*") if p.is_file())
    if not docs:
        raise RoomError(f"{corpus / folder / 'documents'}: no documents found")
    return docs


def _maud_parents(corpus: Path) -> dict[str, str]:
    """MAUD file name -> the acquirer ("Parent") named in its questions."""
    path = corpus / "maud" / "questions.json"
    if not path.is_file():
        return {}
    parents: dict[str, str] = {}
    for test in json.loads(path.read_text(encoding="utf-8")).get("tests", []):
        m = re.search(r'Parent "([^"]+)"', test.get("query", ""))
        for s in test.get("snippets", []):
            if m:
                parents.setdefault(Path(s.get("file_path", "")).name, m.group(1))
    return parents


def _slug(file_name: str) -> str:
    """A short file name: "ACCURAYINC_09_01_2010-EX-10.31-DISTRIBUTOR AGREEMENT" -> "accurayinc_distributor_agreement"."""
    stem = Path(file_name).stem
    # EDGAR exhibit names are COMPANY_DATE-...-EX-<number>-TYPE; keep company and type.
    company = re.match(r"^(.*?)_(\d{8}|\d\d_\d\d_\d{4})(?=[-_])", stem)
    kind = re.sub(r"^.*(?<![A-Za-z])EX-[\w.()]*?[-_]", "", stem)
    short = f"{company.group(1)} {kind}" if company and kind != stem else stem
    return re.sub(r"[^a-z0-9]+", "_", short.lower()).strip("_")[:80] or "contract"


def build_cuad_rooms(
    corpus: str | Path,
    n_rooms: int = 2,
    contracts_per_room: int = 40,
    seed: int = 0,
    heldout_fraction: float = 0.34,
) -> list[Room]:
    """``n_rooms`` rooms of ``contracts_per_room`` labelled CUAD contracts each, with a deal and an NDA."""
    corpus = Path(corpus)
    if n_rooms < 1:
        raise RoomError(f"n_rooms must be at least 1, not {n_rooms}")
    if not 1 <= contracts_per_room <= MAX_CONTRACTS_PER_ROOM:
        raise RoomError(f"contracts_per_room must be 1..{MAX_CONTRACTS_PER_ROOM}, not {contracts_per_room}")
    if not 0.0 <= heldout_fraction <= 1.0:
        raise RoomError(f"heldout_fraction must be in [0, 1], not {heldout_fraction}")
    labelled, unlabelled = load_cuad(corpus)
    if n_rooms * contracts_per_room > len(labelled):
        raise RoomError(
            f"{corpus / 'cuad'}: {n_rooms} rooms x {contracts_per_room} contracts need "
            f"{n_rooms * contracts_per_room} labelled contracts; the corpus has {len(labelled)}"
        )
    mergers = _deal_documents(corpus, "maud")
    ndas = _deal_documents(corpus, "contractnli")
    parents = _maud_parents(corpus)
    rng = random.Random(seed)
    rng.shuffle(labelled)
    rng.shuffle(unlabelled)
    rng.shuffle(mergers)
    rng.shuffle(ndas)
    n_distractors = contracts_per_room // 20  # a few contracts with no rubric items, as real rooms have
    rooms = []
    for i in range(n_rooms):
        name = f"cuad-{seed}-{i:02d}"
        pick = labelled[i * contracts_per_room : (i + 1) * contracts_per_room]
        extra = unlabelled[i * n_distractors : (i + 1) * n_distractors]
        room = _room(name, seed, i, pick, extra, mergers[i % len(mergers)], ndas[i % len(ndas)], parents)
        room.split = split_for(name, heldout_fraction)
        rooms.append(room)
    return rooms


def _room(
    name: str,
    seed: int,
    index: int,
    contracts: list[CuadContract],
    distractors: list[CuadContract],
    merger: Path,
    nda: Path,
    parents: dict[str, str],
) -> Room:
    # Per room, so that room i's target does not depend on how many rooms are built.
    rng = random.Random(f"cuad:{seed}:{index}")
    target = f"{rng.choice(_TARGET_NAMES)} {rng.choice(_TARGET_SUFFIXES)}"
    documents = [
        Document(
            path="00_deal/merger_agreement.txt",
            category="corporate",
            title=f"Agreement and Plan of Merger ({merger.stem})",
            text=merger.read_text(encoding="utf-8"),
            doc_kind="agreement",
        ),
        Document(
            path="00_deal/nda.txt",
            category="corporate",
            title=f"Non-Disclosure Agreement ({nda.stem})",
            text=nda.read_text(encoding="utf-8"),
            doc_kind="agreement",
        ),
    ]
    placed: list[tuple[CuadContract, str]] = []
    used: set[str] = {d.path for d in documents}
    for c in sorted(contracts + distractors, key=lambda c: c.file):
        category, folder = contract_folder(c.file)
        base = f"{folder}/{_slug(c.file)}"
        path, n = f"{base}.txt", 2
        while path in used:  # e.g. "AGREEMENT.txt" and "AGREEMENT(1).txt" slug alike
            path, n = f"{base}_{n}.txt", n + 1
        used.add(path)
        kind = "amendment" if re.search(r"\bAMEND", c.file.upper()) else "agreement"
        documents.append(Document(path=path, category=category, title=c.name, text=c.text, doc_kind=kind))
        if c in contracts:
            placed.append((c, path))
    criteria = [crit for c, path in placed for crit in _criteria(c, path)]
    # every category the experts labelled Yes or No, for each labelled contract: the grader's truth
    # for claims (a claim of a category labelled No is false), beyond the identify criteria
    labels = {path: _labels(c) for c, path in placed}
    room = Room(
        name=name,
        target={
            "name": target,
            "industry": "diversified",
            "jurisdiction": "Delaware",
            "note": "fictional target holding real public contracts",
        },
        deal={
            "type": "merger",
            "buyer": parents.get(merger.name, "the acquirer named in the merger agreement"),
            "agreement": "00_deal/merger_agreement.txt",
            "nda": "00_deal/nda.txt",
            "maud_document": merger.name,
            "contractnli_document": nda.name,
            "sources": SOURCES,
        },
        documents=documents,
        criteria=criteria,
        source="cuad",
        seed=seed,
        claim_labels=labels,
    )
    room.probes = sample_probes(room.documents, seed)
    return room


def _labels(c: CuadContract) -> dict[str, bool]:
    """category slug -> labelled Yes (True) or No (False); categories with neither are left out."""
    out = {}
    for cat in CATEGORIES_CUAD:
        if c.labelled_yes(cat.column):
            out[cat.slug] = True
        elif c.labelled_no(cat.column):
            out[cat.slug] = False
    return out


def _criteria(c: CuadContract, path: str) -> list[Criterion]:
    slug = Path(path).stem
    out = []
    for cat in CATEGORIES_CUAD:
        if not c.labelled_yes(cat.column):
            continue
        spans = [s for e in c.excerpts[cat.column] for s in (locate(e, c.text) or [])]
        out.append(
            Criterion(
                criterion_id=f"{slug}.{cat.slug}",
                kind="identify",
                text=f"The memo flags the {cat.label} provision in {c.name} ({path}) and cites that document.",
                issue_id=f"{slug}.{cat.slug}",
                issue_kind=cat.slug,
                any_of=[list(cat.synonyms)],
                paths=[path],
                evidence=EVIDENCE_SEP.join(spans),
                evidence_paths=[path] if spans else [],
            )
        )
    for absent, neighbour in TRAPS:
        if c.labelled_no(absent) and c.labelled_yes(neighbour):
            cat, near = _BY_COLUMN[absent], _BY_COLUMN[neighbour]
            out.append(
                Criterion(
                    criterion_id=f"{slug}.{cat.slug}.trap",
                    kind="trap",
                    text=(
                        f"The memo does not claim that {c.name} ({path}) has a {cat.label} provision: the expert "
                        f"annotators found none; its {near.label} clause is a different thing."
                    ),
                    issue_id=f"decoy.{slug}.{cat.slug}",
                    issue_kind=cat.slug,
                    is_trap=True,
                    any_of=[list(cat.synonyms)],
                    paths=[path],
                    evidence=EVIDENCE_SEP.join(
                        s for e in c.excerpts[neighbour] for s in (locate(e, c.text) or [])
                    ),
                    evidence_paths=[path],
                )
            )
    return out
