"""One real GRPO optimiser step (TRL GRPOTrainer, SmolLM2-135M + LoRA, CPU) over fixed rollouts.

Shared by the tests that compare a trainer variant's update with plain TRL's:
both start from the same weights and see the same rollouts and rewards.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.training.rollouts import make_rollout_func, reward_from_rollout


def one_step(
    trainer_cls: type,
    smollm2_path: Path,
    out_dir: Path,
    runner: Callable[[list[Any], Any], list[Any]],
    rooms: list[str],
    group: int,
    micro_batch: int = 1,
    optim: str = "adamw_torch",
    learning_rate: float = 1e-2,
) -> tuple[Any, dict, dict, int]:
    """(trainer, LoRA weights before, after, forward passes of the model) for one step over ``rooms``."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(smollm2_path)
    model = AutoModelForCausalLM.from_pretrained(smollm2_path, dtype=torch.float32)
    rollouts = len(rooms) * group
    args = GRPOConfig(
        output_dir=str(out_dir),
        max_steps=1,
        learning_rate=learning_rate,
        optim=optim,
        per_device_train_batch_size=micro_batch,
        gradient_accumulation_steps=rollouts // micro_batch,  # one generation batch per step
        num_generations=group,
        max_completion_length=512,
        beta=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        seed=0,
        data_seed=0,
        disable_tqdm=True,
    )
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    trainer = trainer_cls(
        model=model,
        reward_funcs=[reward_from_rollout],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": r} for r in rooms]),
        processing_class=tokenizer,
        peft_config=lora,
        rollout_func=make_rollout_func(runner, tokenizer, max_length=1024),
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    passes: list[int] = []
    hook = trainer.model.register_forward_hook(lambda module, args, output: passes.append(1))
    trainer.train()
    hook.remove()
    after = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    return trainer, before, after, len(passes)
