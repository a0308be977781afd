"""Benchmark: one GRPO update with and without leaving flat groups out, side by side.

    python tests/bench/bench_rl_update.py [--rollouts 8 --group 4 --flat-groups 1 --tokens 1400]

One optimiser step of TRL GRPOTrainer on the embedded SmolLM2-135M with the
default recipe's LoRA settings and RL micro-batch (pipeline/recipes/default.yaml),
over ``--rollouts`` fixed rollouts of about ``--tokens`` tokens each (a
prompt of two thirds, a completion of one third, as the default recipe's
rollouts: ~1,440 tokens, ~200 of them the root's), ``--flat-groups`` of whose
groups got one reward for every member. Run twice from the same start: plain
GRPOTrainer, and pipeline.training.flat_groups.FlatGroupSkipping. Prints the
update seconds of each, their ratio, how many rollouts went through the model,
and the largest difference between the two runs' LoRA weights after the step
(0 up to float noise: the same update).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from pipeline.config import load_config  # noqa: E402
from pipeline.llm.smollm2 import ensure_model  # noqa: E402
from pipeline.training.rollouts import reward_from_rollout  # noqa: E402
from pipeline.training.sft import lora_config  # noqa: E402


def rollout_func_for(n: int, group: int, flat_groups: int, tokens: int, vocab: int):
    """Fixed token sequences; the first ``flat_groups`` groups get one reward each, the rest a spread."""
    import random

    rng = random.Random(0)
    prompt_len, completion_len = 2 * tokens // 3, tokens - 2 * tokens // 3
    rewards = []
    for g in range(n // group):
        rewards += [0.5] * group if g < flat_groups else [float(i % 2) for i in range(group)]

    def rollout_func(prompts, trainer):
        assert len(prompts) == n, (len(prompts), n)
        return {
            "prompt_ids": [[rng.randrange(100, vocab) for _ in range(prompt_len)] for _ in prompts],
            "completion_ids": [[rng.randrange(100, vocab) for _ in range(completion_len)] for _ in prompts],
            "logprobs": None,
            "rl_reward": rewards,
        }

    return rollout_func


def one_step(trainer_cls, model_dir: Path, cfg, args, out_dir: str) -> tuple[float, int, dict]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    lora = lora_config(cfg)  # the recipe's LoRA, as `pipeline rl` builds it for a base policy
    grpo = GRPOConfig(
        output_dir=out_dir,
        max_steps=1,
        learning_rate=cfg.rl.learning_rate,
        per_device_train_batch_size=cfg.rl.micro_batch,
        gradient_accumulation_steps=args.rollouts // cfg.rl.micro_batch,
        num_generations=args.group,
        max_completion_length=args.tokens,
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
    rooms = [{"prompt": f"room-{i}"} for i in range(args.rollouts // args.group)]
    trainer = trainer_cls(
        model=model,
        reward_funcs=[reward_from_rollout],
        args=grpo,
        train_dataset=Dataset.from_list(rooms),
        processing_class=tokenizer,
        peft_config=lora,
        rollout_func=rollout_func_for(
            args.rollouts, args.group, args.flat_groups, args.tokens, len(tokenizer)
        ),
    )
    passes = []
    hook = trainer.model.register_forward_hook(lambda module, a, output: passes.append(1))
    t0 = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - t0
    hook.remove()
    weights = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    return seconds, len(passes), weights


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rollouts", type=int, default=8)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--flat-groups", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=1400)
    args = ap.parse_args()
    if args.rollouts % args.group or args.flat_groups > args.rollouts // args.group:
        ap.error("--rollouts must be a multiple of --group, with at most rollouts/group --flat-groups")
    from trl import GRPOTrainer

    from pipeline.training.flat_groups import FlatGroupSkipping

    cfg = load_config("default", [])
    model_dir = ensure_model()
    with tempfile.TemporaryDirectory() as tmp:
        plain_s, plain_passes, plain_w = one_step(GRPOTrainer, model_dir, cfg, args, f"{tmp}/plain")
        skip_s, skip_passes, skip_w = one_step(FlatGroupSkipping, model_dir, cfg, args, f"{tmp}/skip")
    diff = max((plain_w[n] - skip_w[n]).abs().max().item() for n in plain_w)
    groups = args.rollouts // args.group
    print(
        f"\none GRPO update: {args.rollouts} rollouts of ~{args.tokens} tokens, {groups} groups of "
        f"{args.group}, {args.flat_groups} flat; LoRA r={cfg.train.lora_r}, micro-batch {cfg.rl.micro_batch}"
    )
    print(f"{'trainer':20s} {'update s':>9s} {'passes':>7s}")
    print(f"{'GRPOTrainer':20s} {plain_s:9.1f} {plain_passes:7d}")
    print(f"{'FlatGroupSkipping':20s} {skip_s:9.1f} {skip_passes:7d}")
    print(f"FlatGroupSkipping / GRPOTrainer update seconds: {skip_s / plain_s:.2f}x")
    print(f"largest LoRA weight difference after the step: {diff:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
