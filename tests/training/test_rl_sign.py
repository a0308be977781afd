"""Sign test of the GRPO wiring: a reward that pays for one visible behaviour raises its frequency.

Real TRL GRPOTrainer, real SmolLM2-135M with LoRA, real in-process generation
through the rollout path the RL stage uses (LivePolicy -> rollout_tokens ->
env_mask); only the episode is a single chat turn and the reward a rule:
1 when the reply starts with "The". The behaviour's frequency is measured
exactly, as the model's probability of "The" as the reply's first token
(averaged over the prompts), so no sampling noise enters the comparison.
If advantages had the wrong sign, or the mask trained the wrong tokens,
three steps would not raise it.
"""

from __future__ import annotations

import pytest

from pipeline.config import BackendConfig
from pipeline.llm.base import GenerationParams
from pipeline.training.rollouts import make_rollout_func, reward_from_rollout, single_turn_runner

pytestmark = pytest.mark.slow

PROMPTS = ["Say something about the sea.", "Describe a cat.", "Tell me about trees.", "Describe a mountain."]


def starts_with_the(text: str) -> float:
    return 1.0 if text.strip().startswith("The") else 0.0


def p_first_token(model, tokenizer, token: str) -> float:
    """Mean probability, over PROMPTS, that the reply's first token is ``token``."""
    import torch

    tid = tokenizer.convert_tokens_to_ids(token)
    total = 0.0
    model.eval()
    with torch.no_grad():
        for q in PROMPTS:
            text = tokenizer.apply_chat_template(
                [{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True
            )
            ids = tokenizer(text, add_special_tokens=False, return_tensors="pt").input_ids
            logits = model(input_ids=ids).logits[0, -1]
            total += torch.softmax(logits.float(), -1)[tid].item()
    return total / len(PROMPTS)


def test_three_grpo_steps_raise_the_paid_behaviour(smollm2_path, tmp_path):
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(smollm2_path)
    model = AutoModelForCausalLM.from_pretrained(smollm2_path, dtype=torch.float32)
    before = p_first_token(model, tokenizer, "The")
    assert 0.05 < before < 0.9, before  # the behaviour is visible and not already saturated

    runner = single_turn_runner(
        AutoTokenizer.from_pretrained(smollm2_path),
        BackendConfig(kind="local", max_batch=8),
        GenerationParams(max_tokens=6, temperature=1.0, top_p=1.0, seed=0),
        starts_with_the,
    )
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=3,
        learning_rate=3e-3,
        per_device_train_batch_size=8,
        gradient_accumulation_steps=1,
        num_generations=4,  # 2 prompts x 4 rollouts per step
        max_completion_length=16,
        beta=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,  # GRPOConfig turns it on by default; sequences this short need none
        seed=0,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward_from_rollout],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": q} for q in PROMPTS]),
        processing_class=tokenizer,
        peft_config=LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM"),
        rollout_func=make_rollout_func(runner, tokenizer, max_length=512),
    )
    trainer.train()
    assert trainer.state.global_step == 3
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    assert len(rewards) == 3
    after = p_first_token(trainer.model, tokenizer, "The")
    print(f"P(reply starts with 'The'): {before:.3f} -> {after:.3f}; reward per step {rewards}")
    assert after > before + 0.05, (before, after, rewards)
