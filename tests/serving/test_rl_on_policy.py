"""GRPO trains what the root sampled, on the real vLLM server (CPU build, the session's server).

- the server's log-probabilities of the tokens it sampled agree with the trainer's at the sampling
  temperature, within the serving dtype's rounding (and not at another temperature);
- a real episode's rollout trains exactly the token ids the server sampled, and nothing else;
- two runs whose adapters share a path but not their weights get two LoRA modules on one server, and
  the weight probe tells each module's weights apart.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
import torch

from pipeline import db
from pipeline.cli import main
from pipeline.config import BackendConfig, load_config
from pipeline.llm.base import GenerationParams
from pipeline.llm.lora_modules import ensure_lora_module, served_models
from pipeline.llm.openai_backend import OpenAIBackend
from pipeline.policies import Policy, adapter_weights_hash
from pipeline.serving import server_dtype
from pipeline.trace_store import load_traces
from pipeline.training.rollouts import Episode, episode_tokens, rollout_tokens
from pipeline.training.weight_probe import ProbeMismatch, check_probe, probe_difference
from tests.conftest import vllm_overrides

pytestmark = pytest.mark.slow

# Mean absolute difference (nats per token) between the server's and a float32 trainer's log-probabilities
# of the same sampled tokens: bfloat16 serving measured 0.04-0.06 on this suite's prompts (docs/rl.md).
TOLERANCE = {"bfloat16": 0.1, "float32": 0.02}
TEMPERATURE = 0.6


@pytest.fixture(scope="module")
def model_and_tokenizer(smollm2_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_path)
    model = AutoModelForCausalLM.from_pretrained(smollm2_path, dtype=torch.float32).eval()
    return model, tok


def _trainer_logprobs(model, prompt_ids, completion_ids, temperature):
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float() / temperature
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(completion_ids)[:, None])[:, 0].tolist()


def test_server_logprobs_of_sampled_tokens_match_the_trainers_at_the_sampling_temperature(
    vllm_port, model_and_tokenizer
):
    model, tok = model_and_tokenizer
    cfg = BackendConfig(
        kind="openai", model="smollm2", base_url=f"http://127.0.0.1:{vllm_port}/v1", return_tokens=True
    )
    messages = [
        {"role": "system", "content": "You are the root of a due-diligence agent."},
        {"role": "user", "content": "Write Python that lists the room's material contracts."},
    ]
    backend = OpenAIBackend(cfg)

    async def go():
        try:
            return await backend.complete(
                messages, GenerationParams(max_tokens=48, temperature=TEMPERATURE, top_p=1.0)
            )
        finally:
            await backend.aclose()

    comp = asyncio.run(go())
    assert comp.token_ids and len(comp.token_ids) == len(comp.logprobs) == comp.completion_tokens
    prompt = tok(
        tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
        add_special_tokens=False,
    )
    mine = _trainer_logprobs(model, prompt["input_ids"], comp.token_ids, TEMPERATURE)
    diff = sum(abs(a - b) for a, b in zip(comp.logprobs, mine, strict=True)) / len(mine)
    dtype = server_dtype(load_config("tiny", vllm_overrides("unused", vllm_port)).serve.dtype)
    assert diff <= TOLERANCE.get(dtype, 0.1), (dtype, diff)
    # The check can fail: the same tokens scored at temperature 1 (the loss before rl set it) are far off.
    wrong = _trainer_logprobs(model, prompt["input_ids"], comp.token_ids, 1.0)
    assert sum(abs(a - b) for a, b in zip(comp.logprobs, wrong, strict=True)) / len(wrong) > 2 * diff


def test_a_real_episode_trains_exactly_the_tokens_the_server_sampled(
    vllm_port, model_and_tokenizer, tmp_path
):
    _, tok = model_and_tokenizer
    run = tmp_path / "run"
    overrides = [
        *vllm_overrides(run, vllm_port),
        "models.root.return_tokens=true",
        "harness.max_turns=2",
        "sampling.max_new_tokens=96",
        "sample.k=2",
        "rooms.n_documents=8",
    ]
    assert main(["--recipe", "tiny", "rooms", "generate", *overrides]) == 0
    assert main(["--recipe", "tiny", "sample", *overrides]) == 0
    con = db.connect(run / "pipeline.duckdb", read_only=True)
    try:
        ids = [r[0] for r in con.execute("select trajectory_id from trajectories").fetchall()]
        traces = load_traces(con, ids, subcalls=False)
        stored = con.execute(
            "select count(*) from turns where token_ids::json::int[] is not null"
        ).fetchone()[0]
    finally:
        con.close()
    assert traces and stored == sum(len(t.turns) for t in traces.values())
    retrained_extra = 0
    for t in traces.values():
        ep = Episode(t.messages(), 0.0, turns=t.turns)
        rt = episode_tokens(tok, ep, 8192)
        assert rt.exact
        sampled = [i for turn in t.turns for i in turn.token_ids]
        trained = [i for i, m in zip(rt.completion_ids, rt.env_mask, strict=True) if m]
        assert trained == sampled  # no token with env_mask 1 that the root did not sample, none left out
        lps = [x for x, m in zip(rt.logprobs, rt.env_mask, strict=True) if m]
        assert lps == [x for turn in t.turns for x in turn.token_logprobs]
        # the context is the conversation the server saw: the re-tokenized text from the root's first token on
        # differs only where the root's turns do
        assert rt.prompt_ids == rollout_tokens(tok, t.messages(), 8192).prompt_ids
        retrained_extra += rollout_tokens(tok, t.messages(), 8192).n_trained - rt.n_trained
    # Re-tokenized text trains tokens the root never sampled (end-of-turn after a stop string, fences the
    # harness closed): at least one per turn stopped at the code fence.
    assert retrained_extra > 0


def _random_adapter(base, folder, seed):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    for name, w in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(w, std=0.05)  # far enough from the base for the probe to see
    model.save_pretrained(str(folder))
    return model


def test_two_runs_with_one_adapter_path_and_different_weights_each_sample_their_own(
    vllm_port, smollm2_path, tmp_path
):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    url = f"http://127.0.0.1:{vllm_port}/v1"
    tok = AutoTokenizer.from_pretrained(smollm2_path)
    models, policies = [], []
    for i in range(2):
        # Two run folders, one recipe: the adapter's stored (relative) path is the same in both.
        folder = tmp_path / f"run{i}" / "adapters" / "rl-same" / "steps" / "step-1"
        base = AutoModelForCausalLM.from_pretrained(smollm2_path, dtype=torch.float32)
        models.append(_random_adapter(base, folder, seed=i).eval())
        start = Policy("smollm2", "openai", "base", "rlm", {"temperature": 0.6, "top_p": 1.0})
        named = dataclasses.replace(start, adapter="adapters/rl-same/steps/step-1", train_id="rl-same")
        # Without the weights' hash both runs' policies, and so their modules, have one name.
        assert (
            policies == [] or named.lora_module == dataclasses.replace(policies[0], weights=None).lora_module
        )
        policies.append(dataclasses.replace(named, weights=adapter_weights_hash(folder)))
        ensure_lora_module(url, policies[i].lora_module, folder.resolve())
    assert policies[0].lora_module != policies[1].lora_module
    assert {p.lora_module for p in policies} <= set(served_models(url))
    for i in range(2):
        # each run's module holds its own weights ...
        check_probe(url, policies[i].lora_module, models[i], tok, 0.1, f"run {i}")
        # ... and the probe sees the other's
        with pytest.raises(ProbeMismatch, match="does not hold the trainer's weights"):
            check_probe(url, policies[1 - i].lora_module, models[i], tok, 0.1, f"run {i}")
    assert probe_difference(url, "smollm2", models[0], tok) > 0.1  # nor is the base model the adapter
