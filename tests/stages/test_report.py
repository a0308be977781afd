"""Report stage on a small, plausible warehouse; the HTML is rendered in headless Chromium.

The warehouse is filled table by table (rooms, criteria, policies,
trajectories, grades, coverage, selections, train runs and logs,
evaluations, a nightly round) and read back through the real views.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.grading.reference import GRADER_VERSION
from stages import report
from tests.doubles import memo_score_row

BASE, SFT = "pol-base-0001", "pol-sft-0002"
T0 = datetime(2025, 3, 1, 9, 0, 0)
KINDS = ["identify", "cite", "quantify", "trap"]


def _trajectory(tid, room, policy, i, purpose, *, status, n_subcalls, memo_started, last_return):
    return {
        "trajectory_id": tid,
        "room_id": room,
        "policy_id": policy,
        "sample_index": i,
        "purpose": purpose,
        "harness": "rlm",
        "sandbox_level": "bwrap+seccomp" if purpose == "eval" else "seccomp",
        "status": status,
        "end_reason": status,
        "memo": "memo " * 50,
        "n_turns": 3,
        "n_subcalls": n_subcalls,
        "root_prompt_tokens": 3000,
        "root_completion_tokens": 400,
        "sub_prompt_tokens": 900 * n_subcalls,
        "sub_completion_tokens": 80 * n_subcalls,
        "wall_s": 30.0,
        "delegated_chars": 3600 * n_subcalls,
        "memo_chars": 250,
        "n_findings": 10,
        "n_findings_carried": 7 if policy == SFT else 4,
        "memo_turn_started_s": memo_started,
        "last_subcall_returned_s": last_return,
        # the memo was begun in turn 1; the call that returned last was issued in turn 2 when it
        # returned after the memo was begun, else in turn 0
        "memo_turn": 1,
        "last_subcall_turn": 2 if last_return > memo_started else 0,
        "started_at": T0,
        "trace": {"turns": []},
    }


def fill_warehouse(con) -> dict:
    rng = random.Random(0)
    rooms, criteria, trajs, grades, coverage, selections, scores = [], [], [], [], [], [], []
    room_ids = {"train": ["room-0", "room-1", "room-2"], "heldout": ["room-3", "room-4", "room-5"]}
    for split, ids in room_ids.items():
        for j, rid in enumerate(ids):
            n_docs = 20 + 15 * j
            rooms.append(
                {"room_id": rid, "name": rid, "source": "generated", "split": split, "seed": j,
                 "target": {"name": f"Target {rid}"}, "deal": {"type": "share purchase"},
                 "n_documents": n_docs, "n_tokens": 600 * n_docs, "created_at": T0}
            )  # fmt: skip
            for k, kind in enumerate(KINDS):
                criteria.append(
                    {"room_id": rid, "criterion_id": f"c{k}", "kind": kind, "issue_id": f"i{k}", "issue_kind": "coc",
                     "text": f"The memo does {kind} things", "spec": {}, "is_trap": kind == "trap"}
                )  # fmt: skip

    def add(tid, rid, pid, i, purpose, quality):
        n_docs = next(r["n_documents"] for r in rooms if r["room_id"] == rid)
        finished = quality > 0.15
        n_sub = max(0, round(n_docs / 5 * (1.0 if pid == SFT else 0.5) + rng.randint(-2, 2)))
        trajs.append(
            _trajectory(tid, rid, pid, i, purpose, status="submitted" if finished else "turn_limit",
                        n_subcalls=n_sub, memo_started=20.0, last_return=25.0 if pid == SFT else 15.0)
        )  # fmt: skip
        for k, kind in enumerate(KINDS):
            passed = True if kind == "trap" else rng.random() < quality
            grades.append({"trajectory_id": tid, "criterion_id": f"c{k}", "judge": "reference", "passed": passed,
                           "reason": "", "graded_at": T0, "kind": kind, "is_trap": kind == "trap",
                           "grader_version": GRADER_VERSION})  # fmt: skip
        issue = [g["passed"] for g in grades[-len(KINDS) :] if not g["is_trap"]]
        scores.append(memo_score_row(tid, sum(issue) / len(issue), graded_at=T0))
        seen = round(100 * min(1.0, quality + 0.2))
        for scope, n in (("all", seen), ("root", seen // 4), ("subagent", seen)):
            coverage.append({"trajectory_id": tid, "scope": scope, "grouping": "total", "group_value": "",
                             "n_probes": 100, "n_seen": n})  # fmt: skip
        return finished, quality

    # Training samples of the base policy, then the selection made from them.
    n = 0
    for rid in room_ids["train"]:
        for i in range(4):
            q = [0.1, 0.35, 0.6, 0.9][i]
            tid = f"t-train-{rid}-{i}"
            finished, _ = add(tid, rid, BASE, i, "train", q)
            reason = (
                "not_finished"
                if not finished
                else ("score" if q < 0.3 else ("coverage" if q < 0.5 else "accepted"))
            )
            selections.append({"selection_id": "sel-1", "trajectory_id": tid, "accepted": reason == "accepted",
                               "reason": reason, "params": {"min_score": 0.3}, "created_at": T0})  # fmt: skip
            n += 1
    # Held-out evaluation samples of both policies.
    for rid in room_ids["heldout"]:
        for i in range(2):
            add(f"t-eval-{rid}-base-{i}", rid, BASE, i, "eval", 0.45)
            add(f"t-eval-{rid}-sft-{i}", rid, SFT, i, "eval", 0.65)
    # An LLM judge on a few trajectories, to exercise judge agreement.
    for g in [g for g in grades if g["trajectory_id"].startswith("t-eval-room-3")]:
        grades.append(dict(g, judge="llm:judge-x", passed=None if g["criterion_id"] == "c2" else g["passed"]))

    policies = [
        {"policy_id": BASE, "base_model": "smollm2", "adapter": None, "backend": "local", "prompt": "worked_example",
         "harness": "rlm", "sampling": {"temperature": 0.8}, "parent_id": None, "train_id": None, "created_at": T0},
        {"policy_id": SFT, "base_model": "smollm2", "adapter": "adapters/train-1", "backend": "local",
         "prompt": "worked_example", "harness": "rlm", "sampling": {"temperature": 0.8}, "parent_id": BASE,
         "train_id": "train-1", "created_at": T0 + timedelta(hours=1)},
    ]  # fmt: skip
    train_runs = [
        {"train_id": "train-1", "dataset_id": "ds-1", "parent_policy_id": BASE, "policy_id": SFT, "config_hash": "abc",
         "adapter_path": "adapters/train-1", "status": "ok", "train_tokens": 123456, "train_seconds": 42.0,
         "final_train_loss": 0.71, "final_eval_loss": 0.93, "started_at": T0, "ended_at": T0 + timedelta(minutes=1)}
    ]  # fmt: skip
    train_logs = [
        {"train_id": "train-1", "step": s, "epoch": s / 10, "loss": 2.0 / (1 + 0.3 * s),
         "eval_loss": (2.2 / (1 + 0.2 * s)) if s % 5 == 0 else None, "learning_rate": 5e-4, "logged_at": T0}
        for s in range(1, 21)
    ]  # fmt: skip

    def ev(pid, metric, value, lo=None, hi=None, n_rooms=3):
        return {"eval_id": "eval-1", "policy_id": pid, "base_policy_id": BASE, "metric": metric, "value": value,
                "ci_low": lo, "ci_high": hi, "n_rooms": n_rooms, "created_at": T0 + timedelta(hours=2)}  # fmt: skip

    evaluations = [
        ev(BASE, "score", 0.461, 0.40, 0.52),
        ev(SFT, "score", 0.601, 0.55, 0.65),
        ev(SFT, "lift", 0.14, 0.08, 0.20),
        ev(BASE, "finished_rate", 0.83, 0.7, 0.95),
        ev(SFT, "finished_rate", 1.0, 1.0, 1.0),
        ev(BASE, "coverage", 0.62, 0.5, 0.7),
        ev(SFT, "coverage", 0.96, 0.9, 1.0),
        ev(BASE, "pass_rate:cite", 0.333),
        ev(SFT, "pass_rate:cite", 0.667),
        ev(BASE, "subcalls", 3.5),
        ev(SFT, "subcalls", 7.25),
        ev(BASE, "delegated_chars", 12600.0),
        ev(SFT, "delegated_chars", 26100.0),
        ev(BASE, "memo_chars", 250.0),
        ev(SFT, "memo_chars", 250.0),
        ev(BASE, "findings_carried", 0.4),
        ev(SFT, "findings_carried", 0.7),
        ev(BASE, "calls_size_corr", 0.17),
        ev(SFT, "calls_size_corr", 0.84),
        ev(BASE, "memo_before_delegation_done", 0.0),
        ev(SFT, "memo_before_delegation_done", 1.0),
    ]
    nightly = [
        {"round_id": "night-1", "champion_before": BASE, "candidate_policy_id": SFT, "promoted": True,
         "lift": 0.14, "lift_ci_low": 0.08, "lift_ci_high": 0.2, "decision": "promoted",
         "started_at": T0 + timedelta(days=1), "ended_at": T0 + timedelta(days=1, hours=1)}
    ]  # fmt: skip
    db.write_many(
        con,
        {
            "rooms": rooms,
            "criteria": criteria,
            "policies": policies,
            "trajectories": trajs,
            "grades": grades,
            "memo_scores": scores,
            "coverage": coverage,
            "selections": selections,
            "train_runs": train_runs,
            "train_logs": train_logs,
            "evaluations": evaluations,
            "nightly_rounds": nightly,
        },
    )
    with db.stage_run(con, "evaluate", "evalhash") as counts:
        counts["rooms"] = 3
    return {"n_train": n}


@pytest.fixture
def built(tmp_path):
    cfg = PipelineConfig()
    cfg.run.dir = str(tmp_path / "run")
    con = db.connect(cfg.run.db_path)
    facts = fill_warehouse(con)
    con.close()
    counts = report.run(cfg)
    return cfg, Path(cfg.run.dir) / "report", counts, facts


def test_report_files_and_numbers(built):
    cfg, out, counts, facts = built
    html, md = (out / "report.html").read_text(), (out / "report.md").read_text()
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == [
        "delegation_vs_size.png",
        "heldout_rooms.png",
        "rejection_funnel.png",
        "root_token_share.png",
        "score_vs_cost.png",
        "score_vs_coverage.png",
        "training_loss.png",
    ]
    assert all((out / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert counts["plots"] == 7

    # Headline: base and SFT with intervals, and the paired lift.
    head = md.split("## Headline", 1)[1].split("##", 1)[0]
    assert "base 46.1% [40.0, 52.0]" in head
    assert "SFT 60.1% [55.0, 65.0], lift +14.0 pts [+8.0, +20.0]" in head
    assert "on 3 held-out rooms" in head
    # Per-policy table and the behaviour table.
    assert re.search(r"\| SFT \| pol-sft-0002 \| 3 \| 60\.1% \[55\.0, 65\.0\] \| \+14\.0 pts", md)
    assert "| 66.7% |" in md  # pass rate: cite of SFT
    assert "| correlation of subagent calls with room size | 0.17 | 0.84 |" in md
    assert "| characters delegated to subagents | 12,600 | 26,100 |" in md
    assert "| share of subagent findings carried into the memo | 40.0% | 70.0% |" in md
    # Known-answer memos on the same held-out rooms, beside the policies and with the grader version.
    known = md.split("## Known-answer memos", 1)[1].split("\n## ", 1)[0]
    assert re.search(
        r"\| policy: SFT \| 3 \| [\d.]+% \| [\d.]+% \| 100\.0% \| grader v" + str(GRADER_VERSION) + r" \|",
        known,
    )
    assert re.search(r"\| empty \| 3 \| 0\.0% \|", known)
    assert "| claim_all | 3 |" in known and f"grader version {GRADER_VERSION}" in known
    # Funnel: every training sample enters; overall row first.
    assert f"| all rooms | {facts['n_train']} | " in md
    # Trajectory table from the view: 12 train + 6 + 6 eval trajectories.
    assert re.search(r"\| base \| train \| 12 \| 3 \|", md)
    assert re.search(r"\| SFT \| eval \| 6 \| 3 \|", md)
    # Judge agreement, nightly rounds, metadata.
    assert "| llm:judge-x | all |" in md
    assert "| night-1 |" in md and "promoted" in md
    assert cfg.hash() in md
    assert "| database (relative to run dir) | pipeline.duckdb |" in md
    assert "| REPL sandbox levels (trajectories) | bwrap+seccomp: 12, seccomp: 12 |" in md
    assert "| evaluate |" in md and "rooms=3" in md
    # Markdown refers to the PNGs next to it; the HTML embeds them and fetches nothing.
    assert "![" in md and "(heldout_rooms.png)" in md
    srcs = re.findall(r'<img src="([^"]+)"', html)
    assert len(srcs) == 7 and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert "http://" not in html and "https://" not in html
    # The stage recorded itself.
    con = db.connect(cfg.run.db_path)
    assert con.execute("select status from stage_runs where stage = 'report'").fetchall() == [("ok",)]


def test_report_on_empty_warehouse_degrades(tmp_path):
    cfg = PipelineConfig()
    cfg.run.dir = str(tmp_path / "run")
    counts = report.run(cfg)
    md = (Path(cfg.run.dir) / "report" / "report.md").read_text()
    assert counts["plots"] == 0
    assert "No evaluation yet" in md and "No selection yet" in md and "No training run yet" in md
    assert not list((Path(cfg.run.dir) / "report").glob("*.png"))


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


# Appended to a copy of the page: writes each image's load result into the DOM for --dump-dom.
PROBE = """
<script>
window.addEventListener("load", function () {
  var out = Array.from(document.images).map(function (img) {
    return {complete: img.complete, width: img.naturalWidth, height: img.naturalHeight};
  });
  var pre = document.createElement("pre");
  pre.id = "img-probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


@pytest.mark.slow
def test_report_renders_in_headless_chromium(built, tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium not installed (make browser installs it); cannot render report.html")
    _, out, _, _ = built
    page = tmp_path / "probe.html"
    page.write_text((out / "report.html").read_text().replace("</body>", PROBE + "</body>"))
    profile = tmp_path / "chromium-profile"
    cmd = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
        f"--user-data-dir={profile}", "--virtual-time-budget=10000", "--dump-dom", page.as_uri(),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert "<title>RLM root self-distillation report</title>" in dom
    assert 'id="headline"' in dom and "60.1%" in dom
    m = re.search(r'<pre id="img-probe">(.*?)</pre>', dom, re.DOTALL)
    assert m, "probe script did not run:\n" + dom[-1500:]
    images = json.loads(m.group(1).replace("&quot;", '"'))
    assert len(images) == 7
    assert all(i["complete"] and i["width"] > 0 and i["height"] > 0 for i in images), images
