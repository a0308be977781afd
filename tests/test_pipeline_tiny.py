"""The whole pipeline on the tiny recipe with the real embedded model, then nightly rounds.

Slow (a few minutes on 2 CPU cores): SmolLM2-135M on the session's vLLM
server samples real root trajectories, TRL trains a real LoRA adapter, the
server loads it at runtime and the held-out evaluation samples it by its
module name, the report renders; then two nightly rounds through the same
server, which keeps running throughout. The recipe has one held-out room, too
few for a lift interval, so distill keeps the base as champion and both
nightly rounds find nothing new: the test's cost does not depend on a lucky
episode (pipeline.champion.MIN_LIFT_ROOMS).
"""

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pipeline import db, lineage
from pipeline.cli import main
from pipeline.config import load_config
from pipeline.llm.lora_modules import served_models
from tests.conftest import vllm_server_pid
from tests.test_live_queries import Shell

ROOT = Path(__file__).resolve().parents[1]

TABLES = [
    "stage_runs",
    "rooms",
    "documents",
    "criteria",
    "probes",
    "policies",
    "trajectories",
    "turns",
    "grades",
    "memo_scores",
    "coverage",
    "selections",
    "datasets",
    "dataset_examples",
    "train_runs",
    "train_logs",
    "evaluations",
    "lineage",
]


@pytest.mark.slow
# the limit counts the shared distill's setup (the session's vLLM server start and distill, 4-5 min
# here): over the suite's 900 s default on a slow machine
@pytest.mark.timeout(1800)
def test_distill_then_two_nightly_rounds(distilled, tmp_path):
    out = distilled.stdout
    assert "held-out score" in out and "report.html" in out
    run = distilled.copy(tmp_path / "run")
    con = db.connect(run / "pipeline.duckdb")
    for table in TABLES:
        assert con.execute(f"select count(*) from {table}").fetchone()[0] > 0, f"{table} is empty"
    splits = dict(con.execute("select split, count(*) from rooms group by 1").fetchall())
    assert splits.get("train", 0) >= 1 and splits.get("heldout", 0) >= 1
    # held-out rooms never reach training data
    leaked = con.execute(
        "select count(*) from dataset_examples e join trajectories t using (trajectory_id) "
        "join rooms r using (room_id) where r.split = 'heldout'"
    ).fetchone()[0]
    assert leaked == 0
    sft = con.execute("select policy_id, parent_id from policies where adapter is not null").fetchall()
    assert len(sft) == 1 and sft[0][1] is not None
    metrics = {m for (m,) in con.execute("select distinct metric from evaluations").fetchall()}
    assert {"score", "recall", "precision", "lift", "coverage", "finished_rate"} <= metrics
    assert con.execute("select count(*) from train_logs where eval_loss is not null").fetchone()[0] > 0
    assert (run / "report" / "report.html").exists()
    # round 0: one held-out room gives a lift but no interval to promote on, so the base stays champion
    ((decision, cand, promoted),) = con.execute(
        "select decision, candidate_policy_id, promoted from nightly_rounds where round_id like 'distill-%'"
    ).fetchall()
    ((lift_rooms,),) = con.execute(
        "select n_rooms from evaluations where metric = 'lift' and policy_id = ?", [sft[0][0]]
    ).fetchall()
    champ = con.execute("select policy_id from champion").fetchone()[0]
    assert splits["heldout"] == 1 and lift_rooms == 1
    assert (cand, promoted, decision) == (sft[0][0], False, "kept_champion")
    assert champ == sft[0][1]
    assert "Champion rounds" in (run / "report" / "report.html").read_text()
    n_train_before = con.execute("select count(*) from trajectories where purpose = 'train'").fetchone()[0]
    # the candidate was evaluated through the running server, by its LoRA module name
    n_eval, n_failed = con.execute(
        "select count(*), count(*) filter (where status = 'error') from trajectories "
        "where policy_id = ? and purpose = 'eval'",
        [sft[0][0]],
    ).fetchone()
    assert n_eval >= 1 and n_failed == 0
    assert sft[0][0] in served_models(f"http://127.0.0.1:{distilled.port}/v1")
    con.close()

    # nightly round 1 and 2 on the same warehouse; an analyst's shell stays open and asks
    # questions through round 1 (answered by the round's query server), and the round is unaffected
    shell, answers, failures = Shell(run), [], []
    done = threading.Event()

    def analyst() -> None:
        try:
            # at least three answers even when the round has nothing to do and ends at once
            while not done.is_set() or len(answers) < 3:
                answers.append(shell.ask_int("select count(*) as n_traj from trajectories;", "n_traj", 300))
                done.wait(2.0)
        except BaseException as exc:  # surfaced by the asserts below
            failures.append(exc)

    asking = threading.Thread(target=analyst)
    asking.start()
    try:
        # no --recipe: the run folder's own (tiny, its root on the session's server)
        assert main(["nightly", f"run.dir={run}"]) == 0
    finally:
        done.set()
        asking.join()
        assert shell.close() == 0
    assert not failures, failures
    assert len(answers) >= 3 and answers == sorted(answers) and answers[0] >= n_train_before
    assert main(["nightly", f"run.dir={run}"]) == 0
    assert vllm_server_pid(distilled.port) == distilled.server_pid  # one server throughout, never restarted
    con = db.connect(run / "pipeline.duckdb")
    rounds = con.execute(
        "select decision, champion_before, candidate_policy_id from nightly_rounds "
        "where round_id like 'nightly-%' order by started_at"
    ).fetchall()
    # both rounds started from distill's champion, the base, which distill had already topped up: no
    # new trajectory, the same selection and dataset, the candidate already evaluated against it
    assert [(d, before, c) for d, before, c in rounds] == [("nothing_to_do", champ, sft[0][0])] * 2
    assert (
        con.execute("select count(*) from trajectories where purpose = 'train'").fetchone()[0]
        == n_train_before
    )
    # the second round's selection considered every training trajectory sampled before it
    last_sel = lineage.newest_output(con, "filter", "selection").id
    considered = con.execute("select count(*) from selections where selection_id = ?", [last_sel]).fetchone()[
        0
    ]
    assert considered >= n_train_before
    assert len(list((run / "logs").glob("nightly-*.log"))) == 2
    con.close()


@pytest.mark.slow
def test_concurrent_nightly_is_refused(tmp_path):
    from pipeline.round import run_lock

    run = tmp_path / "run"
    cfg = load_config("tiny", [f"run.dir={run}"])
    with run_lock(Path(cfg.run.dir)):
        proc = subprocess.run(
            [sys.executable, "-m", "pipeline", "--recipe", "tiny", "nightly", f"run.dir={run}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 1
    assert "another nightly round is running" in proc.stderr
    # the refused start did not even open the warehouse
    assert not (run / "pipeline.duckdb").exists()
