"""RL stage end to end: real rooms, real harness episodes from the live SmolLM2, real TRL GRPO + LoRA.

One `python -m pipeline rl` process is killed (SIGKILL) after its first step
finished, while the second runs; the same command run again continues from
the last finished step. Then every rollout is a trajectory of purpose rl,
graded by the reference judge, exactly rl.num_generations per (room, step),
and none was sampled twice.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline import db
from pipeline.cli import main

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# As small as a real episode allows: one turn plus the memo request, short completions, one room per step.
OVERRIDES = [
    "rooms.n_documents=8",
    "harness.max_turns=1",
    # The zero-shot prompt: about half the worked example's tokens in every rollout and update, and
    # these tests check the wiring, not what the root learns.
    "harness.prompt=base",
    "sampling.max_new_tokens=32",
    "rl.steps=2",
    "rl.num_generations=2",
    "rl.rollouts_per_step=2",
    "rl.max_length=1400",
    "rl.gradient_checkpointing=false",
    "rl.evaluate=false",
    # Resume is what these tests check: every step trains the slots TRL asked for, no replacement groups
    # (tests/training/test_room_rollouts.py covers those).
    "rl.max_replacement_groups=0",
]


def cli(run: Path, *args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["--recipe", "tiny", *args, f"run.dir={run}", *OVERRIDES])
    assert code == 0, out.getvalue()[-3000:]
    return out.getvalue()


def test_killed_rl_run_resumes_without_duplicating_rollouts(tmp_path, smollm2_path):
    from pipeline.training.flat_groups import flat_rollouts  # imports TRL: not at collection

    run = tmp_path / "run"
    cli(run, "rooms", "generate")
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRL_EXPERIMENTAL_SILENCE="1")
    cmd = [sys.executable, "-m", "pipeline", "--recipe", "tiny", "rl", f"run.dir={run}", *OVERRIDES]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    try:
        # Killed once step 1 is checkpointed: step 2 is then sampling or updating.
        while not list((run / "adapters").glob("rl-*/checkpoints/checkpoint-1/trainer_state.json")):
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    out = cli(run, "rl")
    assert "rl: starting from the champion" in out

    con = db.connect(run / "pipeline.duckdb", read_only=True)
    try:
        ((rl_id, status, policy_id, start),) = con.execute(
            "select rl_id, status, policy_id, start_policy_id from rl_runs"
        ).fetchall()
        assert status == "ok" and policy_id
        assert [r[0] for r in con.execute("select step from rl_steps order by step").fetchall()] == [1, 2]
        per = con.execute(
            "select room_id, step, count(*) from rl_rollouts group by all order by step"
        ).fetchall()
        assert [n for _, _, n in per] == [2, 2]  # num_generations per (room, step)
        # No rollout sampled twice: the rl trajectories are exactly the recorded rollouts, all graded.
        n_rl = con.execute("select count(*) from trajectories where purpose = 'rl'").fetchone()[0]
        assert n_rl == 4
        assert (
            con.execute(
                "select count(*) from rl_rollouts r join memo_scores m using (trajectory_id) where m.judge = 'reference'"
            ).fetchone()[0]
            == 4
        )
        # The update left out exactly the rollouts of groups whose rewards were all equal (flat_groups).
        skipped = con.execute("select n_skipped from rl_steps order by step").fetchall()
        rewards = con.execute(
            "select list(reward order by slot) from rl_rollouts group by step order by step"
        ).fetchall()
        assert [n for (n,) in skipped] == [sum(flat_rollouts(r, 2)) for (r,) in rewards]
        # Each group ran as one packed pass, its prompt once: fewer tokens than its rollouts hold, and
        # none for a step whose groups were all flat.
        ran = con.execute(
            "select tokens, update_tokens, n_skipped, n_rollouts from rl_steps order by step"
        ).fetchall()
        for tokens, update_tokens, n_skipped, n_rollouts in ran:
            assert (update_tokens == 0) == (n_skipped == n_rollouts) and update_tokens < tokens, ran
        # Step 1 was sampled by the start policy's weights at the rollouts' top-p 1, step 2 by the adapter
        # after step 1.
        samplers = con.execute("select step, sampling_policy_id from rl_steps order by step").fetchall()
        policies = {
            p: (a, json.loads(s))
            for p, a, s in con.execute("select policy_id, adapter, sampling from policies").fetchall()
        }
        assert policies[samplers[0][1]] == (None, {**policies[start][1], "top_p": 1.0})
        assert samplers[1][1] not in (start, samplers[0][1])
        assert (
            con.execute(
                "select count(distinct t.policy_id) from rl_rollouts r join trajectories t using (trajectory_id) "
                "where r.step = 2 and t.policy_id = ?",
                [samplers[1][1]],
            ).fetchone()[0]
            == 1
        )
        parent = con.execute("select parent_id from policies where policy_id = ?", [policy_id]).fetchone()[0]
        assert parent == start
        kinds = {k for (k,) in con.execute("select distinct kind from lineage where stage = 'rl'").fetchall()}
        assert {"policy", "room", "rl_run", "trajectory"} <= kinds
    finally:
        con.close()
    assert (run / "adapters" / rl_id / "adapter_model.safetensors").exists()
