"""Import a real data room from a folder of PDF, DOCX, HTML, Markdown and text files.

    room, report = import_folder("deal/dataroom", name="acme-2024", rubric_path="deal/rubric.yaml")

Every file under the folder (recursively) becomes one Document whose path is
its path relative to the folder, '/'-separated, e.g. ``IP/patents/us123.pdf``.
A file that cannot be read (corrupt PDF, unsupported extension, no text) is
skipped and listed in the ImportReport with the reason; one bad file never
stops an import. Text that is not UTF-8 is decoded anyway (detected
encoding, else replacement characters) and named in ``report.warnings``.

Category: the first folder along a document's path (top-level first) whose
name matches a keyword in ``CATEGORY_KEYWORDS`` decides it; a document in no
matching folder is ``corporate``. The table, in match order, is the
documented mapping (docs/rubric-file.md repeats it for room authors).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.rooms.model import CATEGORIES, Document, Room
from pipeline.rooms.probes import sample_probes
from pipeline.rooms.store import RoomError

# Ordered: the first category with a keyword in the folder name wins. Ordering
# matters where names overlap: "intellectual property" before real estate's
# "property", "financing" before financial statements' "finance", "insurance
# claims" before litigation's "claims". Keywords match whole words of the
# folder name lower-cased, with '_', '-' and '.' read as spaces and a leading
# "03 " style index dropped; a trailing '*' matches any word ending ("employ*":
# employees, employment). "License" is deliberately absent: "IP licenses" and
# "permits and licenses" want different categories (their other word decides).
CATEGORY_KEYWORDS: list[tuple[str, list[str]]] = [
    (
        "intellectual_property",
        [
            "intellectual property",
            "ip",
            "patent*",
            "trademark*",
            "copyright*",
            "trade secret*",
            "software",
            "domain name*",
        ],
    ),
    (
        "data_privacy",
        ["data privacy", "privacy", "data protection", "gdpr", "cyber*", "information security"],
    ),
    ("tax", ["tax*", "vat"]),
    ("insurance", ["insurance*", "insurer*"]),
    ("environmental", ["environment*", "ehs", "hse", "health and safety"]),
    (
        "employment",
        [
            "employ*",
            "hr",
            "human resource*",
            "personnel",
            "staff",
            "labor",
            "labour",
            "benefit*",
            "compensation",
            "pension*",
            "people",
            "workforce",
        ],
    ),
    (
        "capitalization",
        ["capitali*", "cap table*", "equity", "share*", "stockholder*", "stock", "securities", "options"],
    ),
    ("customers", ["customer*", "client*", "sales"]),
    ("suppliers", ["supplier*", "vendor*", "procurement", "supply", "purchasing"]),
    (
        "financing",
        ["financing*", "debt", "loan*", "credit*", "lending", "indebtedness", "bank*", "guarantee*"],
    ),
    (
        "financial_statements",
        ["financial statement*", "financials", "finance*", "financial", "accounting", "accounts", "audit*"],
    ),
    (
        "real_estate",
        ["real estate", "real property", "property", "properties", "lease*", "premises", "facilities"],
    ),
    ("litigation", ["litigation*", "dispute*", "claim*", "legal proceeding*", "lawsuit*", "proceedings"]),
    ("regulatory", ["regulat*", "compliance", "permit*", "government*", "sanction*", "export*", "antitrust"]),
    ("material_contracts", ["material contract*", "contract*", "agreement*", "commercial", "material"]),
    ("corporate", ["corporate", "governance", "board", "minutes", "charter*", "organi*", "general"]),
]
assert {c for c, _ in CATEGORY_KEYWORDS} <= set(CATEGORIES)

TEXT_EXTENSIONS = {".txt", ".text", ".md", ".markdown", ".rst", ".csv", ".tsv"}
HTML_EXTENSIONS = {".html", ".htm", ".xhtml"}
SUPPORTED_EXTENSIONS = TEXT_EXTENSIONS | HTML_EXTENSIONS | {".pdf", ".docx"}

# doc_kind from the file name, first match wins; anything else is a plain "document".
DOC_KIND_KEYWORDS: list[tuple[str, list[str]]] = [
    ("amendment", ["amendment*", "amend", "addend*", "side letter*"]),
    ("minutes", ["minutes", "resolution*"]),
    ("certificate", ["certificate*"]),
    ("letter", ["letter*"]),
    ("schedule", ["schedule*", "exhibit*", "annex*"]),
    ("spreadsheet", ["cap table*"]),
    ("agreement", ["agreement*", "contract*", "license*", "licence*", "lease*", "deed*", "nda", "msa"]),
]

_INDEX_PREFIX = re.compile(r"^\s*\d+(\.\d+)*\s+")
_HTML_BLOCKS = [
    "p",
    "div",
    "section",
    "article",
    "header",
    "footer",
    "main",
    "aside",
    "nav",
    "ul",
    "ol",
    "dl",
    "table",
    "blockquote",
    "pre",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "address",
    "figure",
    "figcaption",
]
_HTML_LINES = ["li", "tr", "dt", "dd"]  # one line each, no blank line between siblings


@dataclass
class SkippedFile:
    path: str  # relative to the imported folder
    reason: str


@dataclass
class ImportReport:
    folder: str
    imported: list[str] = field(default_factory=list)  # document paths, in room order
    skipped: list[SkippedFile] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # each names its file

    def summary(self) -> str:
        lines = [f"{self.folder}: imported {len(self.imported)} documents, skipped {len(self.skipped)}"]
        lines += [f"  skipped {s.path}: {s.reason}" for s in self.skipped]
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)


class _Unreadable(Exception):
    """A file that yields no document; the message is the reason shown in the report."""


def category_for(path: str) -> str:
    """The category of a room path from its folder names (see CATEGORY_KEYWORDS)."""
    for folder in path.split("/")[:-1]:
        key = _folder_key(folder)
        if key.replace(" ", "_") in CATEGORIES:
            return key.replace(" ", "_")
        for category, words in CATEGORY_KEYWORDS:
            if any(re.search(_keyword_pattern(w), key) for w in words):
                return category
    return "corporate"


def _keyword_pattern(word: str) -> str:
    stem = re.escape(word.rstrip("*"))
    return r"\b" + stem + ("" if word.endswith("*") else r"\b")


def _folder_key(folder: str) -> str:
    key = re.sub(r"[_\-.]+", " ", folder.lower())
    key = _INDEX_PREFIX.sub("", key)
    key = key.replace("&", " and ")
    return re.sub(r"\s+", " ", key).strip()


def doc_kind_for(path: str) -> str:
    stem = re.sub(r"[_\-.]+", " ", Path(path).stem.lower())
    if Path(path).suffix.lower() in {".csv", ".tsv"}:
        return "spreadsheet"
    for kind, words in DOC_KIND_KEYWORDS:
        if any(re.search(_keyword_pattern(w), stem) for w in words):
            return kind
    return "document"


def import_folder(
    folder: str | Path,
    name: str,
    rubric_path: str | Path | None = None,
    split: str = "train",
    seed: int = 0,
) -> tuple[Room, ImportReport]:
    """Read every document under ``folder`` into a Room (source "import") and say what was skipped."""
    root = Path(folder)
    if not root.is_dir():
        raise RoomError(f"{root}: not a folder")
    report = ImportReport(folder=str(root))
    documents: list[Document] = []
    origin: dict[str, str] = {}  # case-folded room path -> the file it came from
    for file in sorted(root.rglob("*")):
        if not file.is_file():
            continue
        rel = file.relative_to(root)
        shown = rel.as_posix()
        if any(part.startswith(".") or part.startswith("~$") for part in rel.parts):
            report.skipped.append(SkippedFile(shown, "hidden or temporary file"))
            continue
        # NFC: the same name typed on macOS (NFD) and elsewhere must be one path.
        path = "/".join(unicodedata.normalize("NFC", p).strip() for p in rel.parts)
        try:
            text, title = _read(file, shown, report.warnings)
        except _Unreadable as e:
            report.skipped.append(SkippedFile(shown, str(e)))
            continue
        # Case-insensitive because a memo cites paths and the judge matches them
        # ignoring case: two such files could never be told apart in a memo.
        key = path.casefold()
        if key in origin:
            raise RoomError(
                f"{root}: files {origin[key]!r} and {shown!r} map to the same document path {path!r}; rename one"
            )
        origin[key] = shown
        documents.append(
            Document(
                path=path,
                category=category_for(path),
                title=title or unicodedata.normalize("NFC", file.stem),
                text=text,
                doc_kind=doc_kind_for(path),
            )
        )
        report.imported.append(path)
    if not documents:
        raise RoomError(f"{root}: no readable documents in the folder ({len(report.skipped)} files skipped)")
    room = Room(
        name=name,
        target={"name": name, "folder": root.resolve().name},
        deal={},
        documents=documents,
        source="import",
        split=split,
        seed=seed,
    )
    if rubric_path is not None:
        from pipeline.rooms.imported.rubric_file import load_rubric

        room.criteria = load_rubric(rubric_path, {d.path for d in documents})
    room.probes = sample_probes(room.documents, seed)
    return room, report


def _read(file: Path, shown: str, warnings: list[str]) -> tuple[str, str]:
    """(text, title from the document's metadata or '') of one file, or _Unreadable."""
    ext = file.suffix.lower()
    if ext not in SUPPORTED_EXTENSIONS:
        raise _Unreadable(f"unsupported file type {ext or '(no extension)'!r}")
    try:
        if ext == ".pdf":
            text, title = _read_pdf(file)
        elif ext == ".docx":
            text, title = _read_docx(file)
        elif ext in HTML_EXTENSIONS:
            text, title = _read_html(file.read_bytes(), shown, warnings)
        else:
            text, title = _decode(file.read_bytes(), shown, warnings), ""
    except _Unreadable:
        raise
    except Exception as e:  # noqa: BLE001 - parsers raise many kinds on corrupt input; report, don't crash
        raise _Unreadable(f"cannot read {ext[1:].upper()}: {type(e).__name__}: {e}") from e
    text = _tidy(text)
    if not text.strip():
        hint = " (a scanned PDF? run OCR first)" if ext == ".pdf" else ""
        raise _Unreadable(f"no text extracted{hint}")
    return text, (title or "").strip()


def _tidy(text: str) -> str:
    """Unix newlines, no trailing spaces, at most one blank line in a row."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    lines = [line.rstrip() for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")


def _decode(data: bytes, shown: str, warnings: list[str]) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    matches = [m for m in from_bytes(data) if m.encoding not in ("utf_8", "utf-8")]
    if matches:
        # On short Western text the detector often ranks a Central European
        # code page first with the same (zero) chaos as Windows-1252; legal
        # documents in this corpus are far likelier to be Windows-1252/Latin-1.
        least = min(m.chaos for m in matches)
        tied = [m for m in matches if m.chaos <= least + 0.01]
        best = next((m for m in tied if m.encoding in ("cp1252", "latin_1")), tied[0])
        warnings.append(f"{shown}: not UTF-8; decoded as {best.encoding} (detected)")
        return str(best)
    warnings.append(f"{shown}: not UTF-8; undecodable bytes replaced with U+FFFD")
    return data.decode("utf-8", errors="replace")


def _read_pdf(file: Path) -> tuple[str, str]:
    from pypdf import PdfReader

    reader = PdfReader(file)
    if reader.is_encrypted and not reader.decrypt(""):
        raise _Unreadable("encrypted PDF (password needed)")
    pages = [page.extract_text() or "" for page in reader.pages]
    title = ""
    if reader.metadata is not None and reader.metadata.title:
        title = str(reader.metadata.title)
        # Word's PDF export stamps its own title; the file name says more.
        if title.lower().startswith("microsoft "):
            title = ""
    return "\n\n".join(p.strip("\n") for p in pages), title


def _read_docx(file: Path) -> tuple[str, str]:
    import docx
    from docx.table import Table

    document = docx.Document(str(file))
    blocks: list[str] = []
    # Body order, so tables stay where they are in the document.
    for item in document.iter_inner_content():
        if isinstance(item, Table):
            for row in item.rows:
                cells = []
                for cell in row.cells:
                    t = " ".join(cell.text.split())
                    if not cells or cells[-1] != t:  # merged cells repeat their text
                        cells.append(t)
                blocks.append(" | ".join(cells))
            blocks.append("")
        else:
            blocks.append(item.text)
    return "\n".join(blocks), document.core_properties.title or ""


def _read_html(data: bytes, shown: str, warnings: list[str]) -> tuple[str, str]:
    from bs4 import BeautifulSoup, NavigableString

    soup = BeautifulSoup(data, "html.parser")
    if getattr(soup, "contains_replacement_characters", False):
        warnings.append(
            f"{shown}: not valid in its declared or detected encoding; bad bytes replaced with U+FFFD"
        )
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(["script", "style", "noscript", "template", "head"]):
        tag.decompose()
    # HTML whitespace is not significant outside <pre>: collapse it so the
    # source's line wrapping does not become line breaks in the text.
    for s in list(soup.find_all(string=True)):
        if isinstance(s, NavigableString) and not s.find_parent("pre"):
            s.replace_with(re.sub(r"\s+", " ", str(s)))
    for br in soup.find_all("br"):
        br.replace_with("\n")
    for cell in soup.find_all(["td", "th"]):
        cell.insert_after(" | ")
    for tag in soup.find_all(_HTML_LINES):
        tag.insert_before("\n")
    for tag in soup.find_all(_HTML_BLOCKS):
        tag.insert_before("\n\n")
        tag.insert_after("\n\n")
    lines = [line.strip().removesuffix(" |").strip() for line in soup.get_text().split("\n")]
    return "\n".join(lines), title
