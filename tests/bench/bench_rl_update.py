"""Benchmark: one GRPO update, plain TRL against the update savings, side by side.

    python tests/bench/bench_rl_update.py [--trainers plain,packed] [--trainers plain,flat --flat-groups 1]

One optimiser step of TRL GRPOTrainer on the embedded SmolLM2-135M with the
default recipe's LoRA, gradient checkpointing and RL micro-batch
(pipeline/recipes/default.yaml), over fixed rollouts shaped as a ``make rl``
step: 2 groups of 4, every rollout of a group with the same prompt of
``--prompt`` tokens, whose first ``--shared`` tokens every room shares (system
prompt and worked example), and completions of the lengths of step 1 of a
measured run. ``--flat-groups`` groups get one reward for every member.
Trainers, each from the same start:
- plain: GRPOTrainer, one rollout per pass (micro-batch 1, as before packing);
- flat: pipeline.training.flat_groups.FlatGroupSkipping, micro-batch 1;
- packed: SharedPrefixPacking + FlatGroupSkipping at the recipe's micro-batch
  (pipeline.training.shared_prefix: a group's prompt once, no padding).
Prints each one's update seconds, passes, tokens run through the model, ratio
to plain, and the largest LoRA weight difference from plain after the step
(the step is plain SGD, so that compares the gradients: float rounding only).
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


def rollout_func_for(args, vocab: int):
    """Fixed token sequences shaped as a `make rl` step: groups share their prompt, rooms share most of it.

    The first ``--flat-groups`` groups get one reward for every member, the rest a spread.
    """
    import random

    rng = random.Random(0)
    lengths = [int(x) for x in args.completions.split(",")]
    shared = [rng.randrange(100, vocab) for _ in range(args.shared)]  # system prompt and worked example
    prompts, completions, rewards = [], [], []
    for g in range(args.rollouts // args.group):
        prompt = shared + [rng.randrange(100, vocab) for _ in range(args.prompt - args.shared)]  # the room
        for i in range(args.group):
            prompts.append(prompt)
            completions.append(
                [rng.randrange(100, vocab) for _ in range(lengths[len(completions) % len(lengths)])]
            )
            rewards.append(0.5 if g < args.flat_groups else float(i % 2))

    def rollout_func(batch_prompts, trainer):
        assert len(batch_prompts) == len(prompts), (len(batch_prompts), len(prompts))
        return {"prompt_ids": prompts, "completion_ids": completions, "logprobs": None, "rl_reward": rewards}

    return rollout_func


def one_step(
    trainer_cls, micro_batch: int, model_dir: Path, cfg, args, out_dir: str
) -> tuple[float, int, dict]:
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
        optim="sgd",  # the update is the gradient: the weight difference compares the gradients
        per_device_train_batch_size=micro_batch,
        gradient_accumulation_steps=args.rollouts // micro_batch,
        num_generations=args.group,
        max_completion_length=cfg.rl.max_length,
        beta=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=cfg.rl.gradient_checkpointing,
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
        rollout_func=rollout_func_for(args, len(tokenizer)),
    )
    passes = []
    hook = trainer.model.register_forward_hook(lambda module, a, output: passes.append(1))
    t0 = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - t0
    hook.remove()
    weights = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    tokens = getattr(trainer, "packed_tokens", 0) or args.rollouts * (args.prompt + max(args.lengths))
    return seconds, len(passes), tokens, weights


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rollouts", type=int, default=8)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--flat-groups", type=int, default=0)
    ap.add_argument("--prompt", type=int, default=1260, help="prompt tokens of a rollout")
    ap.add_argument("--shared", type=int, default=1000, help="prompt tokens every room shares")
    ap.add_argument(
        "--completions",
        default="526,160,141,149,766,160,141,600",
        help="completion lengths, cycled over the rollouts (default: step 1 of a make rl run)",
    )
    ap.add_argument("--trainers", default="plain,packed", help="plain, then any of flat, packed")
    args = ap.parse_args()
    args.lengths = [int(x) for x in args.completions.split(",")]
    if args.rollouts % args.group or args.flat_groups > args.rollouts // args.group:
        ap.error("--rollouts must be a multiple of --group, with at most rollouts/group --flat-groups")
    from trl import GRPOTrainer

    from pipeline.training.flat_groups import FlatGroupSkipping
    from pipeline.training.shared_prefix import trainer_class

    cfg = load_config("default", [])
    trainers = {
        "plain": ("GRPOTrainer", GRPOTrainer, 1),
        "flat": ("flat groups left out", FlatGroupSkipping, 1),
        "packed": (f"packed + flat, mb {cfg.rl.micro_batch}", trainer_class(True, True), cfg.rl.micro_batch),
    }
    chosen = args.trainers.split(",")
    if chosen[0] != "plain" or any(t not in trainers for t in chosen):
        ap.error("--trainers: plain first, then any of flat, packed")
    model_dir = ensure_model()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for key in chosen:
            name, cls, micro_batch = trainers[key]
            results[key] = (name, *one_step(cls, micro_batch, model_dir, cfg, args, f"{tmp}/{key}"))
    real = sum(args.prompt + args.lengths[i % len(args.lengths)] for i in range(args.rollouts))
    print(
        f"\none GRPO update: {args.rollouts} rollouts in groups of {args.group} ({args.flat_groups} flat), "
        f"prompts of {args.prompt} tokens ({args.shared} shared by every room), completions {args.completions}; "
        f"{real} real tokens; LoRA r={cfg.train.lora_r}, gradient checkpointing {cfg.rl.gradient_checkpointing}"
    )
    _, plain_s, _, _, plain_w = results["plain"]
    print(
        f"{'trainer':28s} {'update s':>9s} {'passes':>7s} {'tokens run':>11s} {'vs plain':>9s} {'max |dw|':>9s}"
    )
    for name, seconds, passes, tokens, weights in results.values():
        diff = max((plain_w[n] - weights[n]).abs().max().item() for n in plain_w)
        print(f"{name:28s} {seconds:9.1f} {passes:7d} {tokens:11d} {seconds / plain_s:8.2f}x {diff:9.1e}")
    # LoRA's B starts at 0 (and A gets no gradient while B is 0), so B after the step is the step.
    moved = max(w.abs().max().item() for n, w in plain_w.items() if "lora_B" in n)
    print(f"(one SGD step: the plain step's largest weight change is {moved:.1e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
