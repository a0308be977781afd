"""The command line as a user meets it: one-line errors, and a run folder that keeps every command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline import run_folder
from pipeline.errors import UserError, is_user_facing

ROOT = Path(__file__).resolve().parents[1]


def pipeline(run_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipeline", "--recipe", "tiny", *args, f"run.dir={run_dir}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_a_step_run_too_early_is_one_line_and_recorded(tmp_path):
    """`sample` before `rooms generate`: one line naming the next command, exit 1, a failed record."""
    proc = pipeline(tmp_path, "sample")
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith(("sample", "\r"))]
    assert lines == ["error: no rooms in split 'train': run `python -m pipeline rooms generate` first"]
    assert "Traceback" not in proc.stderr
    (record,) = run_folder.read_records(tmp_path)
    assert record["command"] == "sample" and record["status"] == "failed"
    assert "rooms generate" in record["error"]


@pytest.mark.slow
def test_run_folder_appends_one_record_per_command(tmp_path):
    assert pipeline(tmp_path, "rooms", "list").returncode == 0
    assert run_folder.read_records(tmp_path) == []  # read-only commands leave the folder as it is
    assert pipeline(tmp_path, "rooms", "generate").returncode == 0
    assert pipeline(tmp_path, "rooms", "generate", "rooms.n_rooms=4").returncode == 0
    records = run_folder.read_records(tmp_path)
    assert [(r["command"], r["status"]) for r in records] == [("rooms generate", "ok")] * 2
    first, second = (r["config_hash"] for r in records)
    assert first != second  # a different config, kept beside the first one
    for h in (first, second):
        saved = yaml.safe_load(run_folder.config_file(tmp_path, h).read_text())
        assert saved["run"]["dir"] == str(tmp_path)
    assert yaml.safe_load(run_folder.config_file(tmp_path, second).read_text())["rooms"]["n_rooms"] == 4


@pytest.mark.slow
def test_unknown_key_is_one_line(tmp_path):
    proc = pipeline(tmp_path, "sample", "sample.nope=1")
    assert proc.returncode == 1
    assert (
        proc.stderr.strip().splitlines() == [proc.stderr.strip()]
        and "unknown key 'sample.nope'" in proc.stderr
    )


@pytest.mark.slow
def test_unknown_policy_in_a_recipe_key_is_one_line_naming_the_key(tmp_path):
    assert pipeline(tmp_path, "rooms", "generate").returncode == 0
    proc = pipeline(tmp_path, "evaluate", "evaluate.candidates=[nope]")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert lines == ["error: evaluate.candidates: no policy 'nope' in the warehouse (newest: none yet)"]


def test_user_facing_is_an_attribute_not_a_class_name():
    class Custom(ValueError):
        user_facing = True

    assert is_user_facing(UserError("x")) and is_user_facing(Custom("y"))
    assert not is_user_facing(RuntimeError("z"))
