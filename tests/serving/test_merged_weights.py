"""Merged weights (serve.adapters merged) against a real vLLM server this test starts: a trained
policy is served by loading its adapter merged into the base weights in place, the base by loading
the base again, and each holds its own weights (the weight probe against the trainer's models).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from pipeline import db, sampling
from pipeline.config import load_config
from pipeline.llm.merged_weights import merged_dir
from pipeline.policies import (
    adapter_weights_hash,
    base_policy,
    register_policy,
    serve_policy,
    served_name,
)
from pipeline.rooms import store
from pipeline.serving import BASE_WEIGHTS, ServeError, _root_server, command, merges_adapters, running_servers
from pipeline.training.weight_probe import probe_difference, probe_ids, server_logprobs
from tests.conftest import free_port, require_vllm, vllm_overrides

# In the session server's xdist group though it starts a server of its own: a second server decoding
# beside that group's tests on 2 cores slowed both (make test 12.0 min with it on the other worker,
# docs/benchmarks.md "Test suite time"); in the group it runs while the session's server is idle.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm")]


def _adapter(base, folder, seed):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    model = get_peft_model(
        base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"])
    )
    for name, w in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(w, std=0.05)  # far enough from the base for the probe to see
    model.save_pretrained(str(folder))
    return model.eval()


def test_policies_are_served_by_their_merged_weights_one_at_a_time(smollm2_path, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from stages import rooms

    require_vllm()
    port = free_port()
    cfg = load_config(
        "tiny",
        [
            *vllm_overrides(tmp_path / "run", port),
            "serve.adapters=merged",
            "serve.manage=true",
            "serve.env={VLLM_CPU_KVCACHE_SPACE: '1', VLLM_CPU_NUM_OF_RESERVED_CPU: '1'}",
        ],
    )
    rooms.run(cfg)
    url = cfg.models.root.base_url
    tok = AutoTokenizer.from_pretrained(smollm2_path)
    base_model = AutoModelForCausalLM.from_pretrained(smollm2_path, dtype=torch.float32).eval()
    base = base_policy(cfg)
    trained, models = [], []
    for i in range(2):  # two adapters at one stored path, as two runs of one recipe would leave them
        folder = tmp_path / "run" / "adapters" / f"sft-{i}"
        m = AutoModelForCausalLM.from_pretrained(smollm2_path, dtype=torch.float32)
        models.append(_adapter(m, folder, seed=i))
        p = dataclasses.replace(
            base, adapter=f"adapters/sft-{i}", parent_id=base.policy_id, train_id="train-x"
        )
        trained.append(dataclasses.replace(p, weights=adapter_weights_hash(folder)))

    with pytest.raises(ServeError, match="serve.adapters: merged .* needs a server this command starts"):
        merges_adapters(cfg)  # no server started yet
    with running_servers(cfg) as specs:
        assert [(s.lora, s.reloadable) for s in specs] == [(False, True)]
        assert "--enable-lora" not in command(cfg, specs[0])
        assert merges_adapters(cfg)
        server = _root_server(cfg)
        ids = probe_ids(tok)
        at_start = server_logprobs(url, "smollm2", ids)
        assert probe_difference(url, "smollm2", base_model, tok) < 0.1

        for p, model in zip(trained, models, strict=True):
            serve_policy(p, cfg)
            assert served_name(p, cfg) == "smollm2" and server.weights == p.weights
            assert (merged_dir(cfg.run.dir, p.weights) / "model.safetensors").exists()
            # the server holds this adapter's weights: close to the trainer's model, far from the base
            # and from the other adapter
            own = probe_difference(url, "smollm2", model, tok)
            assert own < 0.1
            assert probe_difference(url, "smollm2", base_model, tok) > 2 * own + 0.02
            other = models[1 - trained.index(p)]
            assert probe_difference(url, "smollm2", other, tok) > 2 * own + 0.02

        # the base again: exactly the weights the server started with (its prefix cache cleared)
        serve_policy(base, cfg)
        assert server.weights == BASE_WEIGHTS
        assert server_logprobs(url, "smollm2", ids) == at_start

        # sampling goes through serve_policy: a trained policy's episode runs on its merged weights
        con = db.connect(cfg.run.db_path)
        try:
            short = dataclasses.replace(trained[0], sampling={**trained[0].sampling, "max_new_tokens": 32})
            register_policy(con, short)
            room = store.room_names(con, split="heldout")[:1]
            counts = sampling.sample_policy(con, cfg, short, room, 1, "eval")
            assert counts["sampled"] == 1 and counts["failed"] == 0
            assert server.weights == short.weights
            (trace,) = con.execute(
                "select trace from trajectories where policy_id = ?", [short.policy_id]
            ).fetchone()
            assert '"smollm2"' in trace  # the requests carry the base's served name
        finally:
            con.close()
    assert not merges_adapters(
        dataclasses.replace(cfg, serve=dataclasses.replace(cfg.serve, adapters="auto"))
    )
