"""Local transformers backend: generation, batching of concurrent requests, per-row stops, adapters."""

from __future__ import annotations

import asyncio

import pytest

from pipeline.config import BackendConfig
from pipeline.llm.base import ContextLimitError, GenerationParams, make_backend
from pipeline.llm.local import LocalBackend, _cut_at_stop

CODE_PROMPTS = [
    "Write Python code that prints the sum of 2 and 3, in a ```python block.",
    "Write python code printing hello in a ```python block.",
]
PLAIN_PROMPT = "What is the capital of France?"


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_cut_at_stop_keeps_the_stop_string():
    assert _cut_at_stop("```python\nx = 1\n```\n\nMore text", ["```\n"]) == "```python\nx = 1\n```\n"
    assert _cut_at_stop("a\n```\nb```\n", ["```\n", "\n```\n"]) == "a\n```\n"
    assert _cut_at_stop("no fence here", ["```\n"]) is None
    assert _cut_at_stop("x", [""]) is None


@pytest.fixture(scope="module")
def local(smollm2_path):
    b = make_backend(BackendConfig(kind="local", model=str(smollm2_path), max_batch=8))
    yield b
    b.close()


@pytest.mark.slow
def test_generates_and_counts_tokens(local):
    assert isinstance(local, LocalBackend)
    comp = asyncio.run(local.complete(user(PLAIN_PROMPT), GenerationParams(max_tokens=20)))
    assert "Paris" in comp.text
    assert comp.prompt_tokens == len(local.encode(user(PLAIN_PROMPT)))
    assert 0 < comp.completion_tokens <= 20
    assert comp.finish_reason in ("stop", "length") and comp.model == str(local.cfg.model)


@pytest.mark.slow
def test_concurrent_requests_share_generate_calls_and_stop_per_row(local):
    stop = GenerationParams(max_tokens=64, stop=["```\n"])
    calls_before, sizes_before = local.generate_calls, len(local.batch_sizes)

    async def main():
        return await asyncio.gather(*[local.complete(user(p), stop) for p in [*CODE_PROMPTS, PLAIN_PROMPT]])

    results = asyncio.run(main())
    assert local.generate_calls - calls_before < 3  # three requests, fewer generate calls
    assert sum(local.batch_sizes[sizes_before:]) == 3 and max(local.batch_sizes[sizes_before:]) >= 2
    for comp in results[:2]:
        # Each code row ends right after its closing fence, nothing past it.
        assert comp.text.startswith("```") and comp.text.endswith("```\n"), comp.text
        assert comp.text.count("```") == 2
        assert comp.finish_reason == "stop" and comp.completion_tokens < 64
    assert "Paris" in results[2].text and "```" not in results[2].text
    # Rows stopped on their own: their lengths differ.
    assert len({c.completion_tokens for c in results}) > 1

    # Without the stop string the model keeps talking after the block.
    unstopped = asyncio.run(local.complete(user(CODE_PROMPTS[0]), GenerationParams(max_tokens=64)))
    assert len(unstopped.text) > len(results[0].text) and unstopped.text.startswith(
        results[0].text.rstrip("\n")
    )


@pytest.mark.slow
def test_seeded_sampling_is_reproducible(local):
    params = GenerationParams(max_tokens=12, temperature=1.0, top_p=0.95, seed=1234)
    a = asyncio.run(local.complete(user("Tell me a word."), params))
    b = asyncio.run(local.complete(user("Tell me a word."), params))
    assert a.text == b.text and a.completion_tokens > 0


@pytest.mark.slow
def test_context_limit_uses_the_real_tokenizer(local):
    n = len(local.encode(user("word " * 50)))
    saved = local.context_tokens
    local.context_tokens = n - 1
    try:
        with pytest.raises(ContextLimitError, match=f"prompt of {n} tokens"):
            asyncio.run(local.complete(user("word " * 50), GenerationParams(max_tokens=4)))
        local.context_tokens = n
        assert (
            asyncio.run(local.complete(user("word " * 50), GenerationParams(max_tokens=2))).completion_tokens
            > 0
        )
    finally:
        local.context_tokens = saved


@pytest.mark.slow
def test_loads_a_peft_adapter(smollm2_path, tmp_path, local):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(smollm2_path)
    # Random (not zero) LoRA B matrices, so the adapter visibly changes the output.
    lora = LoraConfig(r=8, lora_alpha=64, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(base, lora).save_pretrained(tmp_path / "adapter")

    adapted = LocalBackend(
        BackendConfig(kind="local", model=str(smollm2_path), adapter=str(tmp_path / "adapter"))
    )
    try:
        params = GenerationParams(max_tokens=12)
        with_adapter = asyncio.run(adapted.complete(user(PLAIN_PROMPT), params))
        without = asyncio.run(local.complete(user(PLAIN_PROMPT), params))
    finally:
        adapted.close()
    assert adapted.name.endswith("+adapter")
    assert with_adapter.text != without.text

    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        LocalBackend(BackendConfig(kind="local", model=str(smollm2_path), adapter=str(tmp_path / "missing")))


def test_bad_config_is_refused(tmp_path):
    with pytest.raises(ValueError, match="max_batch"):
        LocalBackend(BackendConfig(kind="local", max_batch=0))
    with pytest.raises(ValueError, match="dtype"):
        LocalBackend(BackendConfig(kind="local", dtype="float99"))
    with pytest.raises(FileNotFoundError, match="models.\\*.model"):
        LocalBackend(BackendConfig(kind="local", model=str(tmp_path / "nope")))


@pytest.mark.slow
def test_ensure_model_reuses_a_finished_cache(smollm2_path, monkeypatch):
    import transformers

    from pipeline.llm import smollm2

    assert smollm2.is_converted(smollm2_path)
    assert (smollm2_path / "model.safetensors").exists() and (smollm2_path / "tokenizer.json").exists()

    def no_conversion(*a, **k):
        raise AssertionError("ensure_model converted again although the cache is complete")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_conversion)
    monkeypatch.setenv("RLM_MODEL_CACHE", str(smollm2_path))
    assert smollm2.ensure_model(smollm2_path) == smollm2_path
    # The default model name (and "") resolves to the cached folder; anything else is a path.
    assert smollm2.resolve_model_path("smollm2-135m-instruct") == smollm2_path
    assert smollm2.resolve_model_path("") == smollm2_path
    assert smollm2.resolve_model_path(str(smollm2_path)) == smollm2_path


@pytest.mark.slow
def test_failed_conversion_leaves_no_half_cache(tmp_path, monkeypatch):
    import transformers

    from pipeline.llm import smollm2

    def killed(*a, **k):
        raise KeyboardInterrupt("conversion interrupted")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", killed)
    with pytest.raises(KeyboardInterrupt):
        smollm2.ensure_model(tmp_path / "cache" / "smollm2")
    assert list((tmp_path / "cache").iterdir()) == []
