"""One GRPO step with the project's rollout_func, run by `accelerate launch --num_processes 2` (gloo, CPU).

Launched by tests/training/test_rl_accelerate.py; writes what rank 0 saw to
the JSON file named by argv[2] (argv[1]: the model folder).
"""

from __future__ import annotations

import json
import sys


def main(model_path: str, out_path: str) -> None:
    import torch
    from accelerate import PartialState
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from pipeline.config import BackendConfig
    from pipeline.llm.base import GenerationParams
    from pipeline.training.rollouts import make_rollout_func, reward_from_rollout, single_turn_runner

    # CPU with two processes: accelerate's MULTI_CPU state (gloo) needs cpu=True before anything else starts it.
    state = PartialState(cpu=True)
    torch.set_num_threads(1)  # two processes on a small shared machine
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    seen: list[int] = []

    def runner_with_count(prompts, trainer):
        seen.append(len(prompts))
        return inner(prompts, trainer)

    inner = single_turn_runner(
        AutoTokenizer.from_pretrained(model_path),
        BackendConfig(kind="local", max_batch=4),
        GenerationParams(max_tokens=4, temperature=1.0, seed=state.process_index),
        lambda text: float(len(text.split()) % 2),  # any reward that differs within a group
    )
    args = GRPOConfig(
        output_dir=f"{out_path}.ckpt",
        max_steps=1,
        learning_rate=1e-3,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=1,
        num_generations=2,  # 2 processes x 2 = one generation batch of 4: 2 prompts x 2 rollouts
        max_completion_length=8,
        logging_steps=1,
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
        train_dataset=Dataset.from_list([{"prompt": q} for q in ["Name a colour.", "Name a fruit."]]),
        processing_class=tokenizer,
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"),
        rollout_func=make_rollout_func(runner_with_count, tokenizer, max_length=256),
    )
    trainer.train()
    lora_b = sum(p.detach().abs().sum().item() for n, p in trainer.model.named_parameters() if "lora_B" in n)
    if state.is_main_process:
        result = {
            "world_size": state.num_processes,
            "backend": str(torch.distributed.get_backend()) if torch.distributed.is_initialized() else None,
            "global_step": trainer.state.global_step,
            "prompts_per_rollout_call": seen,
            "lora_b_abs_sum": lora_b,
            "logged": [h for h in trainer.state.log_history if "loss" in h],
        }
        with open(out_path, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
