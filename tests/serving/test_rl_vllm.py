"""RL on a real vLLM server from two processes: `accelerate launch --num_processes 2 -m pipeline rl`.

The root is served by the session's vLLM server (CPU build, .venv-vllm) with
runtime LoRA loading. The launch runs two processes over gloo: the main one
holds the warehouse, runs every rollout through the server and writes it; the
other gets the plan and its share of each step's batch from it, and both take
their share of the update. After step 1 the main process saves the adapter and
loads it as the LoRA module named after the step's policy, and step 2's
episodes request that module.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline import db
from pipeline.cli import main
from pipeline.llm.lora_modules import served_models
from tests.conftest import vllm_overrides

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
RL = [
    "rooms.n_documents=8",
    # The zero-shot prompt: about half the worked example's tokens in every rollout and update, and
    # these tests check the wiring, not what the root learns.
    "harness.prompt=base",
    "sampling.max_new_tokens=32",
    "rl.steps=2",
    "rl.num_generations=2",
    # 1 room x 2 rollouts, one per process and pass: the least that still splits a group over the two
    "rl.rollouts_per_step=2",
    "rl.micro_batch=1",
    "rl.max_length=1400",
    "rl.gradient_checkpointing=false",
    "rl.evaluate=false",
    "rl.generation=server",
    "rl.max_replacement_groups=0",  # these tests check the wiring: every step trains the slots TRL asked for
    "train.lora_r=4",
    "train.lora_alpha=8",
]


# Two GRPO updates: minutes on quiet cores, far more on a busy shared machine.
@pytest.mark.timeout(2400)
def test_two_processes_and_the_second_step_samples_the_first_steps_adapter(vllm_port, tmp_path):
    exe = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("the accelerate command line is not installed")
    run = tmp_path / "run"
    overrides = [*vllm_overrides(run, vllm_port), *RL]
    assert main(["--recipe", "tiny", "rooms", "generate", *overrides]) == 0
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [
        # --multi_gpu is accelerate's torchrun launcher; with no GPU the rl stage asks for gloo on CPU.
        exe, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
        "--dynamo_backend", "no", "-m", "pipeline", "--recipe", "tiny", "rl", *overrides,
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    # the main process printed each step once (it alone starts from the champion: the base)
    out = proc.stdout
    assert out.count("rl step 1: reward") == 1 and out.count("rl step 2: reward") == 1, out[-2000:]
    assert out.count("rl: starting from the champion") == 1, out[-2000:]
    # DDP needs every process to run the same passes: flat groups are not skipped, and it says so.
    assert "rl: every rollout goes through the update (several processes" in out, out[-2000:]
    # the other process took two steps over gloo, each on its 1 of the 2 rollouts the main one ran
    follower = next(o for o in _printed_objects(out) if o.get("process") == 1)
    assert (follower["backend"], follower["steps"], follower["rollouts_trained"]) == ("gloo", 2, 2)

    con = db.connect(run / "pipeline.duckdb", read_only=True)
    try:
        ((rl_id, status, gen, start, policy_id),) = con.execute(
            "select rl_id, status, generation, start_policy_id, policy_id from rl_runs"
        ).fetchall()
        steps = con.execute(
            "select step, n_rollouts, sampling_policy_id, sync_s, "
            # flat-group skipping is off with two processes; packing is on (the main process's passes)
            "loss is not null and n_skipped is null and update_tokens > 0, "
            # the update corrected for the sampler, and the weight probe ran before each step sampled
            "ratio_mean > 0 and ratio_max >= ratio_mean and probe_logprob_diff < 0.1 and watch is not null "
            "from rl_steps order by step"
        ).fetchall()
        slots = con.execute(
            "select r.step, r.slot, t.purpose, t.policy_id, t.trace, count(m.trajectory_id) from rl_rollouts r "
            "join trajectories t using (trajectory_id) "
            "left join memo_scores m on m.trajectory_id = r.trajectory_id and m.judge = 'reference' "
            "where r.rl_id = ? group by all order by r.step, r.slot",
            [rl_id],
        ).fetchall()
        n_rl = con.execute("select count(*) from trajectories where purpose = 'rl'").fetchone()[0]
        rows = con.execute("select policy_id, sampling, weights_hash from policies").fetchall()
        sampling = {p: json.loads(s) for p, s, _ in rows}
        weights = {p: w for p, _, w in rows}
        n_policies = con.execute("select count(*) from policies where policy_id = ?", [policy_id]).fetchone()[
            0
        ]
    finally:
        con.close()
    assert status == "ok" and gen == "server" and n_policies == 1
    assert [(s, n, loss, on_policy) for s, n, _, _, loss, on_policy in steps] == [
        (1, 2, True, True),
        (2, 2, True, True),
    ]
    assert steps[0][3] is not None  # step 1's adapter was saved and loaded into the server
    # every slot of every step once (the other process's included), written by the main process and graded
    assert [(s, slot, p) for s, slot, p, *_ in slots] == [(s, i, "rl") for s in (1, 2) for i in range(2)]
    assert all(n >= 1 for *_, n in slots) and n_rl == 4
    # step 1 was sampled by the start's weights (at the rollouts' top-p 1); step 2 by the adapter after
    # step 1, asked for by its module name, which carries the hash of its weights
    step1, step2 = steps[0][2], steps[1][2]
    assert step2 not in (start, step1)
    assert sampling[step1] == {**sampling[start], "top_p": 1.0} and weights[step1] is None
    assert weights[step2] and weights[policy_id]
    assert all(pid == (step1 if s == 1 else step2) for s, _, _, pid, _, _ in slots)
    assert all(step2 in json.dumps(json.loads(t).get("usage", {})) for s, _, _, _, t, _ in slots if s == 2)
    assert step2 in served_models(f"http://127.0.0.1:{vllm_port}/v1")  # still loaded: the newest module
    records = [json.loads(line) for line in (run / "commands.jsonl").read_text().splitlines()]
    assert [r["command"] for r in records].count("rl") == 1  # only the main process records the command
    assert (run / "adapters" / rl_id / "adapter_model.safetensors").exists()


def _printed_objects(text: str) -> list[dict]:
    """The JSON objects the processes printed (each command prints its result as one object)."""
    decoder, found = json.JSONDecoder(), []
    for i in (i for i in range(len(text)) if text.startswith("{\n", i) and (i == 0 or text[i - 1] == "\n")):
        try:
            found.append(decoder.raw_decode(text, i)[0])
        except ValueError:
            continue
    return found
