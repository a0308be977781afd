"""A GRPO step with the project's rollout_func under `accelerate launch --num_processes 2` on CPU (gloo)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_grpo_step_on_two_processes(smollm2_path, tmp_path):
    exe = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("the accelerate command line is not installed")
    out = tmp_path / "result.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", TRL_EXPERIMENTAL_SILENCE="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [
        # --multi_gpu is accelerate's torchrun launcher; with no GPU and cpu=True in the script it is gloo on CPU.
        exe, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
        "--dynamo_backend", "no", "-m", "tests.training.grpo_two_process", str(smollm2_path), str(out),
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(out.read_text())
    assert result["world_size"] == 2
    assert result["backend"] == "gloo"
    assert result["global_step"] == 1
    # Each process generated its own half of the batch (2 of the 4 rollouts) through rollout_func.
    assert result["prompts_per_rollout_call"] == [2]
    assert result["logged"] and result["lora_b_abs_sum"] > 0  # the update reached the LoRA weights
