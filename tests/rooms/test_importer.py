"""Folder importer and rubric files, on real files of every supported format written here."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import docx
import pytest

from pipeline import db
from pipeline.rooms.imported.folder import category_for, import_folder
from pipeline.rooms.imported.rubric_file import load_rubric
from pipeline.rooms.store import RoomError, load_room, save_room


def minimal_pdf(lines: list[str], title: str | None = None) -> bytes:
    """A valid one-page PDF showing ``lines`` in Helvetica, with correct xref offsets."""

    def esc(s: str) -> str:
        return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    content = "BT /F1 12 Tf 14 TL 72 720 Td " + " ".join(f"({esc(line)}) Tj T*" for line in lines) + " ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        " /Resources << /Font << /F1 5 0 R >> >> >>",
        f"<< /Length {len(content)} >>\nstream\n{content}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    if title:
        objects.append(f"<< /Title ({esc(title)}) >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    info = f" /Info {len(objects)} 0 R" if title else ""
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{info} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


@pytest.fixture()
def dataroom(tmp_path: Path) -> Path:
    root = tmp_path / "dataroom"
    (root / "IP" / "patents").mkdir(parents=True)
    (root / "Employees" / "executives").mkdir(parents=True)
    (root / "03_material_contracts" / "customers").mkdir(parents=True)
    (root / "Misc").mkdir()

    (root / "IP" / "patents" / "us_patent_9001.txt").write_text(
        "United States Patent 9,001. Assignee: Acme Robotics, Inc.\nClaims: a gripper.\n", encoding="utf-8"
    )
    (root / "README.md").write_text("# Data room index\n\nSee the folders below.\n", encoding="utf-8")
    (root / "Misc" / "board_update.html").write_text(
        "<html><head><title>Board Update Q3</title><style>p {color: red}</style>"
        "<script>var x = 'hidden script text';</script></head><body>"
        "<h1>Quarterly update</h1><p>Revenue grew <b>twelve</b>\n   percent.</p>"
        "<ul><li>Hired a CFO</li><li>Opened Berlin office</li></ul>"
        "<table><tr><th>Item</th><th>Value</th></tr><tr><td>Cash</td><td>$4.2m</td></tr></table>"
        "</body></html>",
        encoding="utf-8",
    )
    d = docx.Document()
    d.core_properties.title = "CEO Employment Agreement"
    d.add_heading("Employment Agreement", level=1)
    d.add_paragraph("The Executive shall receive a base salary of $350,000 per year.")
    table = d.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Bonus", "50% of salary"
    table.cell(1, 0).text, table.cell(1, 1).text = "Severance", "12 months"
    d.add_paragraph("Either party may terminate on 90 days notice.")
    d.save(root / "Employees" / "executives" / "ceo_agreement.docx")
    (root / "03_material_contracts" / "customers" / "msa_globex.pdf").write_bytes(
        minimal_pdf(
            ["Master Services Agreement with Globex Corporation.", "Term: three years."], title="Globex MSA"
        )
    )
    (root / "03_material_contracts" / "customers" / "broken.pdf").write_bytes(
        b"%PDF-1.4\nthis is not a pdf\n"
    )
    (root / "Misc" / "lettre_latin1.txt").write_bytes(
        "Contrat de cession. Le prix est payé à la signature; très important.\n".encode("latin-1")
    )
    (root / "Misc" / "empty.txt").write_text("  \n\n", encoding="utf-8")
    (root / "Misc" / "model.xlsx").write_bytes(b"PK\x03\x04 not really a workbook")
    return root


def test_import_reads_every_format_and_keeps_the_folder_tree(dataroom: Path):
    room, report = import_folder(dataroom, name="acme", seed=3)
    paths = {d.path for d in room.documents}
    assert paths == {
        "IP/patents/us_patent_9001.txt",
        "README.md",
        "Misc/board_update.html",
        "Employees/executives/ceo_agreement.docx",
        "03_material_contracts/customers/msa_globex.pdf",
        "Misc/lettre_latin1.txt",
    }
    assert report.imported == sorted(report.imported) and set(report.imported) == paths
    assert room.source == "import" and room.split == "train" and room.seed == 3

    by = {d.path: d for d in room.documents}
    assert by["IP/patents/us_patent_9001.txt"].category == "intellectual_property"
    assert by["Employees/executives/ceo_agreement.docx"].category == "employment"
    assert by["03_material_contracts/customers/msa_globex.pdf"].category == "material_contracts"
    assert by["README.md"].category == "corporate"
    assert by["Misc/board_update.html"].category == "corporate"

    pdf = by["03_material_contracts/customers/msa_globex.pdf"]
    assert (
        "Master Services Agreement with Globex Corporation." in pdf.text and "Term: three years." in pdf.text
    )
    assert pdf.title == "Globex MSA"

    word = by["Employees/executives/ceo_agreement.docx"]
    assert word.title == "CEO Employment Agreement"
    lines = word.text.split("\n")
    assert "Employment Agreement" in lines
    # Table rows stay rows, and stay between the paragraphs around them.
    assert lines.index("Bonus | 50% of salary") < lines.index("Either party may terminate on 90 days notice.")
    assert "Severance | 12 months" in lines

    html = by["Misc/board_update.html"]
    assert html.title == "Board Update Q3"
    assert "Revenue grew twelve percent." in html.text  # inline tags and source wrapping do not split lines
    assert "Hired a CFO\nOpened Berlin office" in html.text and "Item | Value\nCash | $4.2m" in html.text
    assert "hidden script text" not in html.text and "color: red" not in html.text

    assert by["IP/patents/us_patent_9001.txt"].title == "us_patent_9001"
    latin = by["Misc/lettre_latin1.txt"]
    assert "payé à la signature; très important" in latin.text

    skipped = {s.path: s.reason for s in report.skipped}
    assert set(skipped) == {"03_material_contracts/customers/broken.pdf", "Misc/empty.txt", "Misc/model.xlsx"}
    assert (
        "PDF" in skipped["03_material_contracts/customers/broken.pdf"]
        or "no text" in skipped["03_material_contracts/customers/broken.pdf"]
    )
    assert "no text" in skipped["Misc/empty.txt"]
    assert "unsupported" in skipped["Misc/model.xlsx"] and ".xlsx" in skipped["Misc/model.xlsx"]
    assert len(report.warnings) == 1 and "Misc/lettre_latin1.txt" in report.warnings[0]
    assert "broken.pdf" in report.summary()

    assert room.probes and {p.path for p in room.probes} == paths
    for p in room.probes:
        assert by[p.path].text[p.char_offset :].startswith(p.text) or p.text in by[p.path].text


def test_undecodable_text_gets_replacement_characters_and_a_warning(tmp_path: Path):
    (tmp_path / "a.txt").write_bytes(b"Binary-ish \xff\xfe\x00\x81 text\n" * 3)
    room, report = import_folder(tmp_path, name="r")
    assert room.documents[0].text.startswith("Binary-ish")
    assert report.warnings and "a.txt" in report.warnings[0] and "not UTF-8" in report.warnings[0]


@pytest.mark.parametrize(
    ("folder", "category"),
    [
        ("IP", "intellectual_property"),
        ("Intellectual Property", "intellectual_property"),
        ("07 - Intellectual_Property", "intellectual_property"),
        ("IPO", "corporate"),
        ("HR", "employment"),
        ("Employees", "employment"),
        ("Financing", "financing"),
        ("Finance", "financial_statements"),
        ("Real Estate & Leases", "real_estate"),
        ("Insurance Claims", "insurance"),
        ("5.2 Permits and Licenses", "regulatory"),
        ("Cap Table", "capitalization"),
        ("data_privacy", "data_privacy"),
        ("Misc", "corporate"),
    ],
)
def test_category_from_folder_name(folder: str, category: str):
    assert category_for(f"{folder}/doc.pdf") == category


def test_nested_folder_decides_when_the_top_level_one_does_not_match():
    assert category_for("Legal/Tax/returns_2023.pdf") == "tax"
    assert category_for("Legal/Tax/Leases/x.pdf") == "tax"  # the first matching folder wins
    assert category_for("top.pdf") == "corporate"


def test_folder_without_readable_documents_is_an_error(tmp_path: Path):
    (tmp_path / "only").mkdir()
    with pytest.raises(RoomError, match="only.*no readable documents"):
        import_folder(tmp_path / "only", name="r")
    (tmp_path / "only" / "bad.pdf").write_bytes(b"not a pdf")
    (tmp_path / "only" / "x.doc").write_bytes(b"old word")
    with pytest.raises(RoomError, match="only.*no readable documents"):
        import_folder(tmp_path / "only", name="r")
    with pytest.raises(RoomError, match="not a folder"):
        import_folder(tmp_path / "missing", name="r")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Contracts/Memo.txt", "Contracts/memo.txt"),
        (unicodedata.normalize("NFC", "café.txt"), unicodedata.normalize("NFD", "café.txt")),
    ],
)
def test_two_files_mapping_to_one_path_is_an_error_naming_both(tmp_path: Path, a: str, b: str):
    for name in (a, b):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(f"text of {name}", encoding="utf-8")
    if len(list(tmp_path.rglob("*.txt"))) < 2:
        pytest.skip("this file system folds these names into one file")
    with pytest.raises(RoomError) as e:
        import_folder(tmp_path, name="r")
    assert a in str(e.value) and b in str(e.value)


def test_room_round_trips_through_a_duckdb_file(dataroom: Path, tmp_path: Path):
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text(
        "- criterion_id: ip-1\n"
        "  kind: identify\n"
        "  text: The memo names the patent assignee and cites the patent.\n"
        "  entities: [Acme Robotics]\n"
        "  paths: [IP/patents/us_patent_9001.txt]\n"
        "  evidence: 'Assignee: Acme Robotics, Inc.'\n"
        "- criterion_id: emp-1\n"
        "  kind: quantify\n"
        "  text: The memo states the CEO salary.\n"
        "  amounts: [{value: 350000}]\n"
        "  any_of: [[salary, compensation]]\n"
        "- criterion_id: trap-1\n"
        "  kind: trap\n"
        "  text: The memo does not call the Globex MSA exclusive.\n"
        "  any_of: [[exclusivity, exclusively]]\n"
        "  paths: [03_material_contracts/customers/msa_globex.pdf]\n",
        encoding="utf-8",
    )
    room, _ = import_folder(dataroom, name="acme", rubric_path=rubric, split="heldout", seed=1)
    assert [c.criterion_id for c in room.criteria] == ["ip-1", "emp-1", "trap-1"]
    assert room.criteria[2].is_trap and room.criteria[1].amounts[0].value == 350000.0

    path = tmp_path / "w.duckdb"
    con = db.connect(path)
    save_room(con, room)
    con.close()
    con = db.connect(path)
    back = load_room(con, "acme")
    con.close()
    assert back.source == "import" and back.split == "heldout" and back.seed == 1
    key = lambda d: d.path  # noqa: E731
    assert [(d.path, d.category, d.title, d.doc_kind, d.text) for d in sorted(back.documents, key=key)] == [
        (d.path, d.category, d.title, d.doc_kind, d.text) for d in sorted(room.documents, key=key)
    ]
    assert sorted(back.criteria, key=lambda c: c.criterion_id) == sorted(
        room.criteria, key=lambda c: c.criterion_id
    )
    assert back.probes == room.probes


# --- rubric files -----------------------------------------------------------------------------

DOCS = {"contracts/msa.txt", "ip/patent.pdf"}


def write_jsonl(path: Path, rows: list[dict | str]) -> Path:
    path.write_text(
        "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", encoding="utf-8"
    )
    return path


GOOD = {"criterion_id": "c1", "kind": "identify", "text": "Flags the MSA.", "paths": ["contracts/msa.txt"]}


def test_jsonl_rubric_loads_every_field(tmp_path: Path):
    full = {
        "criterion_id": "c2",
        "kind": "quantify",
        "text": "States the cap.",
        "entities": ["Globex"],
        "any_of": [["cap", "limit"]],
        "amounts": [{"value": 2.5e6, "tolerance": 0.05}],
        "paths": ["contracts/msa.txt"],
        "forbidden": ["uncapped"],
        "is_trap": False,
        "issue_id": "cap",
        "evidence": "liability shall not exceed $2.5 million",
        "evidence_paths": ["contracts/msa.txt"],
    }
    crits = load_rubric(write_jsonl(tmp_path / "r.jsonl", [GOOD, "", full]), DOCS)
    assert [c.criterion_id for c in crits] == ["c1", "c2"]
    c = crits[1]
    assert c.amounts[0].value == 2.5e6 and c.amounts[0].tolerance == 0.05
    assert c.any_of == [["cap", "limit"]] and c.forbidden == ["uncapped"] and c.issue_id == "cap"
    assert crits[0].amounts == [] and not crits[0].is_trap


@pytest.mark.parametrize(
    ("bad_row", "field", "message"),
    [
        ({"criterion_id": "c9", "kind": "identify", "paths": ["contracts/msa.txt"]}, "text", "required"),
        ({**GOOD, "criterion_id": "c9", "pahts": []}, "pahts", "did you mean 'paths'"),
        ({**GOOD, "criterion_id": "c9", "kind": "spot"}, "kind", "unknown kind 'spot'"),
        (
            {**GOOD, "criterion_id": "c9", "paths": ["contracts/nope.txt"]},
            "paths",
            "not a document in the room",
        ),
        ({**GOOD, "criterion_id": "c9", "any_of": ["cap", "limit"]}, "any_of", "phrase groups"),
        ({**GOOD, "criterion_id": "c9", "amounts": [{"value": "lots"}]}, "amounts[0].value", "a number"),
        ({**GOOD, "criterion_id": "c9", "kind": "trap", "is_trap": False}, "is_trap", "trap"),
        ({"criterion_id": "c9", "kind": "identify", "text": "vague"}, "entities", "at least one of"),
        (GOOD, "criterion_id", "duplicate id 'c1' (first at line 1)"),
    ],
)
def test_jsonl_errors_name_file_line_and_field(tmp_path: Path, bad_row: dict, field: str, message: str):
    path = write_jsonl(tmp_path / "rubric.jsonl", [GOOD, bad_row])
    with pytest.raises(RoomError) as e:
        load_rubric(path, DOCS)
    msg = str(e.value)
    assert "rubric.jsonl" in msg and "line 2" in msg and f"field '{field}'" in msg and message in msg


def test_invalid_json_names_the_line(tmp_path: Path):
    path = write_jsonl(tmp_path / "rubric.jsonl", [GOOD, "", '{"criterion_id": "c3",'])
    with pytest.raises(RoomError, match=r"rubric\.jsonl: line 3: invalid JSON"):
        load_rubric(path, DOCS)


def test_yaml_errors_name_file_item_and_field(tmp_path: Path):
    path = tmp_path / "rubric.yaml"
    path.write_text(
        "criteria:\n"
        "  - criterion_id: a\n"
        "    kind: identify\n"
        "    text: ok\n"
        "    paths: [contracts/msa.txt]\n"
        "  - criterion_id: b\n"
        "    kind: identify\n"
        "    text: also ok\n"
        "    entitites: [Globex]\n",
        encoding="utf-8",
    )
    with pytest.raises(RoomError) as e:
        load_rubric(path, DOCS)
    assert (
        str(e.value).startswith(str(path))
        and "item 2 (line 6)" in str(e.value)
        and "'entitites'" in str(e.value)
    )

    path.write_text("- criterion_id: a\n  kind: [unclosed\n", encoding="utf-8")
    with pytest.raises(RoomError, match=r"rubric\.yaml: invalid YAML at line \d+"):
        load_rubric(path, DOCS)

    path.write_text("- just a string\n", encoding="utf-8")
    with pytest.raises(RoomError, match=r"rubric\.yaml: item 1 \(line 1\): a criterion is a mapping"):
        load_rubric(path, DOCS)


def test_rubric_file_kinds_and_emptiness(tmp_path: Path):
    with pytest.raises(RoomError, match=r"r\.csv: rubric files are"):
        load_rubric(write_jsonl(tmp_path / "r.csv", [GOOD]), DOCS)
    (tmp_path / "e.yaml").write_text("# nothing yet\n", encoding="utf-8")
    with pytest.raises(RoomError, match=r"e\.yaml: the rubric has no criteria"):
        load_rubric(tmp_path / "e.yaml", DOCS)
    trap = load_rubric(write_jsonl(tmp_path / "t.jsonl", [{**GOOD, "kind": "trap"}]), DOCS)[0]
    assert trap.is_trap  # kind trap implies is_trap


def test_import_with_a_bad_rubric_names_the_rubric_file(dataroom: Path, tmp_path: Path):
    path = write_jsonl(tmp_path / "rubric.jsonl", [{**GOOD, "paths": ["IP/patents/us_patent_9001.tx"]}])
    with pytest.raises(
        RoomError, match=r"rubric\.jsonl: line 1: field 'paths'.*did you mean 'IP/patents/us_patent_9001.txt'"
    ):
        import_folder(dataroom, name="acme", rubric_path=path)
