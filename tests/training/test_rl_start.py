"""RL from an SFT champion: GRPO goes on training the start policy's own adapter.

Real SmolLM2-135M, a real LoRA adapter on disk (random B, as training leaves it),
a real GRPOTrainer step through the rollout path the RL stage uses. The adapter
the step saves has the start adapter's keys and rank and different weights, so
it is still a LoRA on the base model that vLLM can serve as a module.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from pipeline.config import BackendConfig, load_config
from pipeline.llm.base import GenerationParams
from pipeline.policies import base_policy
from pipeline.training.rl import RLError, start_model
from pipeline.training.rollouts import make_rollout_func, reward_from_rollout, single_turn_runner

pytestmark = pytest.mark.slow


def _adapter(smollm2_path, folder):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(smollm2_path),
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )
    model.save_pretrained(folder)
    return folder


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "adapter_model.safetensors"))


def test_grpo_continues_the_start_policys_adapter(smollm2_path, tmp_path):
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    run = tmp_path / "run"
    cfg = load_config("tiny", [f"run.dir={run}", "train.lora_r=16"])
    _adapter(smollm2_path, run / "adapters" / "train-sft")
    base = base_policy(cfg)
    start = dataclasses.replace(base, adapter="adapters/train-sft", train_id="train-sft")

    # a base policy gets a fresh LoRA from the train section; the SFT policy keeps its own adapter
    _, fresh = start_model(cfg, base, AutoModelForCausalLM.from_pretrained(smollm2_path))
    assert fresh is not None and fresh.r == 16
    model, peft_config = start_model(
        cfg, start, AutoModelForCausalLM.from_pretrained(smollm2_path, dtype=torch.float32)
    )
    assert peft_config is None
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)

    tokenizer = AutoTokenizer.from_pretrained(smollm2_path)
    runner = single_turn_runner(
        AutoTokenizer.from_pretrained(smollm2_path),
        BackendConfig(kind="local", max_batch=8),
        GenerationParams(max_tokens=6, temperature=1.0, top_p=1.0, seed=0),
        lambda text: float(len(text)),  # differs within a group almost surely: the step has a gradient
    )
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=1,
        learning_rate=3e-3,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=16,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        seed=0,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward_from_rollout],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": "Describe a cat."}, {"prompt": "Tell me about trees."}]),
        processing_class=tokenizer,
        peft_config=peft_config,
        rollout_func=make_rollout_func(runner, tokenizer, max_length=256),
    )
    trainer.train()
    assert trainer.state.global_step == 1
    trainer.save_model(str(tmp_path / "after"))

    before, after = _weights(run / "adapters" / "train-sft"), _weights(tmp_path / "after")
    assert set(after) == set(before)
    assert json.loads((tmp_path / "after" / "adapter_config.json").read_text())["r"] == 4
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed, "one GRPO step left the start adapter unchanged"


def test_a_start_adapter_folder_without_its_config_is_a_clear_error(tmp_path):
    cfg = load_config("tiny", [f"run.dir={tmp_path}"])
    (tmp_path / "adapters" / "gone").mkdir(parents=True)
    start = dataclasses.replace(base_policy(cfg), adapter="adapters/gone", train_id="train-x")
    with pytest.raises(RLError, match=r"rl.policy: sft-\w+'s adapter folder adapters/gone"):
        start_model(cfg, start, model=None)
