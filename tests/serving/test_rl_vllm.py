"""RL with generation on a real vLLM server: step 2's rollouts come from step 1's adapter, by module name.

The root is served by vLLM (CPU build, .venv-vllm) with runtime LoRA loading;
after step 1 the stage saves the adapter and loads it as the LoRA module named
after the step's policy, and step 2's episodes request that module.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline import db
from pipeline.config import load_config
from pipeline.llm.lora_modules import served_models
from tests.conftest import vllm_overrides

pytestmark = pytest.mark.slow

RL = [
    "rooms.n_documents=8",
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
    "rl.generation=server",
    "train.lora_r=4",
    "train.lora_alpha=8",
]


# Two GRPO updates: minutes on quiet cores, far more on a busy shared machine.
@pytest.mark.timeout(2400)
def test_second_step_samples_the_first_steps_adapter_on_vllm(vllm_port, tmp_path):
    from pipeline.policies import base_policy, register_policy
    from stages import rl, rooms

    cfg = load_config("tiny", vllm_overrides(tmp_path / "run", vllm_port) + RL)
    rooms.run(cfg)
    con = db.connect(cfg.run.db_path)
    try:
        cfg.rl.policy = register_policy(con, base_policy(cfg))
    finally:
        con.close()
    counts = rl.run(cfg)
    served = served_models(cfg.models.root.base_url)
    con = db.connect(cfg.run.db_path, read_only=True)
    try:
        (gen,) = con.execute("select generation from rl_runs").fetchone()
        assert gen == "server"
        (step2_policy,) = con.execute("select sampling_policy_id from rl_steps where step = 2").fetchone()
        assert step2_policy != cfg.rl.policy
        traces = [
            json.loads(t)
            for (t,) in con.execute(
                "select t.trace from rl_rollouts r join trajectories t using (trajectory_id) where r.step = 2"
            ).fetchall()
        ]
        # The step-2 episodes asked the server for the module named after the step-1 adapter's policy.
        assert traces and all(step2_policy in json.dumps(t.get("usage", {})) for t in traces)
        (sync_s,) = con.execute("select sync_s from rl_steps where step = 1").fetchone()
        assert sync_s is not None
    finally:
        con.close()
    assert step2_policy in served  # still loaded: it is the newest module
    assert counts["skipped"] is False and Path(cfg.run.dir, counts["adapter_path"]).exists()
