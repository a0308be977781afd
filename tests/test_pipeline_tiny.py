"""The whole pipeline on the tiny recipe with the real embedded model, then nightly rounds.

Slow (a few minutes on 2 CPU cores): SmolLM2-135M on the session's vLLM
server samples real root trajectories, TRL trains a real LoRA adapter, the
server loads it at runtime and the held-out evaluation samples it by its
module name, the report renders; then two nightly rounds through the same
server, which keeps running throughout. The first round always trains (it
tops the champion up past distill's k), so the test costs the same whether or
not distill promoted its policy.
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
# here) and one or two real nightly rounds: over the suite's 900 s default on a slow machine
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
    # round 0: distill's SFT policy is the champion exactly when its lift's interval lies above zero
    ((decision, cand, promoted, lift_low),) = con.execute(
        "select decision, candidate_policy_id, promoted, lift_ci_low from nightly_rounds "
        "where round_id like 'distill-%'"
    ).fetchall()
    champ = con.execute("select policy_id from champion").fetchone()[0]
    assert (
        cand == sft[0][0]
        and promoted == (lift_low > 0)
        and decision == ("promoted" if promoted else "kept_champion")
    )
    assert champ == (sft[0][0] if promoted else sft[0][1])
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

    # One more trajectory per training room than distill sampled: round 1 has new data whichever
    # policy is the champion, so it always filters, trains, evaluates and decides (one optimiser step:
    # the round's plumbing is the test, not the candidate's quality). Round 2 gets the same settings,
    # so it has work only when round 1 promoted its candidate.
    k = load_config("tiny", [f"run.dir={run}"]).sample.k
    nightly = ["nightly", f"run.dir={run}", f"nightly.top_up_k={k + 1}", "train.extra.max_steps=1"]
    asking = threading.Thread(target=analyst)
    asking.start()
    try:
        # no --recipe: the run folder's own (tiny, its root on the session's server)
        assert main(nightly) == 0
    finally:
        done.set()
        asking.join()
        assert shell.close() == 0
    assert not failures, failures
    assert len(answers) >= 3 and answers == sorted(answers) and answers[0] >= n_train_before
    assert main(nightly) == 0
    assert vllm_server_pid(distilled.port) == distilled.server_pid  # one server throughout, never restarted
    con = db.connect(run / "pipeline.duckdb")
    rounds = con.execute(
        "select decision, champion_before, candidate_policy_id from nightly_rounds "
        "where round_id like 'nightly-%' order by started_at"
    ).fetchall()
    assert len(rounds) == 2 and all(d in ("promoted", "kept_champion", "nothing_to_do") for d, _, _ in rounds)
    # the first round started from distill's champion, topped it up, and trained and judged a new candidate
    assert rounds[0][1] == champ and rounds[0][0] != "nothing_to_do"
    assert rounds[0][2] not in (champ, sft[0][0], sft[0][1])
    sampled = con.execute(
        "select count(*) from trajectories where policy_id = ? and purpose = 'train'", [champ]
    ).fetchone()[0]
    assert sampled == (k + 1) * splits["train"]
    # the second round's selection considered every training trajectory sampled before it
    last_sel = lineage.newest_output(con, "filter", "selection").id
    considered = con.execute("select count(*) from selections where selection_id = ?", [last_sel]).fetchone()[
        0
    ]
    assert considered >= n_train_before
    if rounds[0][0] != "promoted":
        assert rounds[1][0] == "nothing_to_do"
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
