"""`python -m pipeline rooms ...`: malformed inputs fail clearly and leave the warehouse as it was."""

import pytest

from pipeline import db
from pipeline.cli import main


def _counts(tmp_path):
    con = db.connect(tmp_path / "run" / "pipeline.duckdb")
    out = {
        t: con.execute(f"select count(*) from {t}").fetchone()[0] for t in ("rooms", "documents", "criteria")
    }
    con.close()
    return out


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "docs" / "01_corporate"
    d.mkdir(parents=True)
    (d / "charter.txt").write_text("Certificate of Incorporation. The Company is a Delaware corporation.")
    (d / "minutes.md").write_text("# Board minutes\nThe Board approved the side letter with Acme.")
    return tmp_path / "docs"


def _import(tmp_path, folder, *extra):
    return main(["rooms", "import", str(folder), "--name", "acme", *extra, f"run.dir={tmp_path / 'run'}"])


def test_import_then_show_and_list(tmp_path, folder, capsys):
    assert _import(tmp_path, folder) == 0
    assert main(["rooms", "show", "acme", f"run.dir={tmp_path / 'run'}"]) == 0
    out = capsys.readouterr().out
    assert "01_corporate/" in out and "2 docs" in out
    assert _counts(tmp_path)["documents"] == 2


@pytest.mark.parametrize(
    "name, text, fragment",
    [
        ("rubric.yaml", "- criterion_id: c1\n  kind: identify\n  text: [unclosed\n", "rubric.yaml"),
        (
            "rubric.jsonl",
            '{"criterion_id": "c1", "kind": "identify", "text": "t", "paths": ["01_corporate/charter.txt"]}\n'
            '{"criterion_id": "c2", "text": "t", "paths": ["01_corporate/charter.txt"]}\n',
            "line 2",
        ),
        (
            "rubric.jsonl",
            '{"criterion_id": "c1", "kind": "identify", "text": "t", "paths": ["nope.txt"]}\n',
            "line 1",
        ),
    ],
)
def test_bad_rubric_names_file_and_row_and_changes_nothing(tmp_path, folder, capsys, name, text, fragment):
    assert _import(tmp_path, folder) == 0  # an existing room must survive the failed import
    before = _counts(tmp_path)
    rubric = tmp_path / name
    rubric.write_text(text)
    folder2 = folder  # same documents, new room name
    rc = main(
        [
            "rooms",
            "import",
            str(folder2),
            "--name",
            "acme2",
            "--rubric",
            str(rubric),
            f"run.dir={tmp_path / 'run'}",
        ]
    )
    assert rc == 1
    err = capsys.readouterr().err
    assert name in err and fragment in err
    assert _counts(tmp_path) == before


def test_empty_folder_and_duplicate_paths(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _import(tmp_path, empty) == 1
    assert "empty" in capsys.readouterr().err
    dup = tmp_path / "dup" / "a"
    dup.mkdir(parents=True)
    (dup / "X.txt").write_text("Upper case file name text for the room.")
    (dup / "x.txt").write_text("Lower case file name text for the room.")
    assert _import(tmp_path, tmp_path / "dup") == 1
    err = capsys.readouterr().err
    assert "X.txt" in err and "x.txt" in err
    assert _counts(tmp_path)["rooms"] == 0


def test_room_plan_spreads_sizes_deterministically():
    from pipeline.config import load_config
    from pipeline.rooms.synthetic.plan import room_plan

    cfg = load_config("default")
    plan = room_plan(cfg)
    sizes = [n for *_, n in plan]
    lo, hi = (
        cfg.rooms.n_documents * (1 - cfg.rooms.size_spread),
        cfg.rooms.n_documents * (1 + cfg.rooms.size_spread),
    )
    assert min(sizes) == round(lo) and max(sizes) == round(hi)
    assert len(set(sizes)) > len(sizes) // 2
    assert plan == room_plan(load_config("default"))
    assert {s for _, _, s, _ in plan} == {"train", "heldout"}
    flat = room_plan(load_config("default", ["rooms.size_spread=0.0"]))
    assert {n for *_, n in flat} == {cfg.rooms.n_documents}
