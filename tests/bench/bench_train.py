"""Benchmark: SFT training tokens/s on this CPU, padded vs packed vs padding-free.

    python tests/bench/bench_train.py [--steps 12 --examples 64 --max-length 2048 --modes padded,packed]

On 2 shared CPU cores one step of the default recipe (batch 2, ~1,600-token
examples) takes about two minutes, so the default run takes over an hour.

Synthetic root conversations of realistic length (system prompt, task, 2-4
code turns with REPL outputs of varying size: about 600-3,200 tokens) are tokenized
with the embedded model's chat template and root-only masks
(pipeline.training.masking), then trained for ``--steps`` steps with the
default recipe's LoRA settings (r, alpha, target modules, learning rate,
batch size from pipeline/recipes/default.yaml) three ways:

- padded: batches padded to their longest example;
- packed: TRL best-fit-decreasing packing into max_length rows (padding-free);
- padding-free: no packing, each batch flattened into one row with position ids.

Tokens/s counts real (non-padding) tokens, so the figures compare like with
like; the padded mode also reports how much of its compute went to padding.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pipeline.config import load_config  # noqa: E402
from pipeline.training import base_model_path  # noqa: E402
from pipeline.training.masking import tokenize_conversation  # noqa: E402
from pipeline.training.sft import lora_config  # noqa: E402

SYSTEM = (
    "You are the root agent of a due-diligence review. The data room is loaded in a Python REPL as `room` "
    "(room.docs(), room.read(path), room.search(pattern)). Write Python in ```python blocks; only what you "
    "print comes back. Delegate reading with llm_query(prompt) or llm_batch(prompts). Finish with submit(memo)."
)
FOLDERS = ["01_corporate", "02_finance", "03_material_contracts", "04_employment", "05_ip", "06_litigation"]


def synthetic_conversation(rng: random.Random, i: int) -> list[dict]:
    msgs = [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": f"Review the data room of Target {i} GmbH (share purchase) and write a memo.",
        },
    ]
    n_turns = rng.randint(2, 4)
    for t in range(n_turns):
        folder = rng.choice(FOLDERS)
        if t < n_turns - 1:
            code = (
                f"I will check {folder}.\n```python\ndocs = room.docs(folder={folder!r})\n"
                "answers = llm_batch([f'List consent, change-of-control and termination terms:\\n{d.text}' "
                "for d in docs])\nfor d, a in zip(docs, answers):\n    print(d.path, '->', a[:300])\n```"
            )
            msgs.append({"role": "assistant", "content": code})
            lines = [
                f"{folder}/doc-{k:03d}.txt -> Section {k}.{rng.randint(1, 9)}: consent of the counterparty is "
                f"required for assignment; notice period {rng.randint(10, 90)} days."
                for k in range(rng.randint(3, 24))
            ]
            msgs.append({"role": "user", "content": "\n".join(lines)})
        else:
            memo = " ".join(f"Finding {k}: consent required under {rng.choice(FOLDERS)}." for k in range(8))
            msgs.append({"role": "assistant", "content": f"```python\nsubmit({memo!r})\n```"})
    return msgs


def run_mode(name: str, model_path: str, data, cfg, steps: int, max_length: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    t = cfg.train
    packing, padding_free = name == "packed", name == "padding-free"
    with tempfile.TemporaryDirectory() as out:
        args = SFTConfig(
            output_dir=out,
            max_steps=steps,
            learning_rate=t.learning_rate,
            per_device_train_batch_size=t.batch_size,
            gradient_accumulation_steps=1,
            max_length=None if padding_free else max_length,
            packing=packing,
            padding_free=padding_free,
            logging_steps=steps,
            save_strategy="no",
            eval_strategy="no",
            report_to="none",
            bf16=False,
            include_num_input_tokens_seen="non_padding",
            disable_tqdm=True,
            seed=0,
        )
        tok = AutoTokenizer.from_pretrained(model_path)
        model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
        # The train stage's own LoRA settings, so the figures hold for what it trains.
        trainer = SFTTrainer(
            model=model, args=args, train_dataset=data, processing_class=tok, peft_config=lora_config(cfg)
        )
        batch_positions = 0
        if name == "padded":  # how many positions the padded batches hold (real + padding)
            for batch in trainer.get_train_dataloader():
                batch_positions += batch["input_ids"].numel()
        t0 = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - t0
        tokens = int(trainer.state.num_input_tokens_seen)
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return {"mode": name, "tokens": tokens, "seconds": seconds, "tok_s": tokens / seconds,
            "loss": losses[-1] if losses else float("nan"), "positions": batch_positions}  # fmt: skip


def main() -> None:
    import datasets
    import torch
    from transformers import AutoTokenizer

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--examples", type=int, default=64)
    p.add_argument("--max-length", type=int, default=2048)
    p.add_argument("--modes", default="padded,packed,padding-free")
    a = p.parse_args()

    cfg = load_config("default")
    model_path = base_model_path("smollm2-135m-instruct")
    tok = AutoTokenizer.from_pretrained(model_path)
    rng = random.Random(0)
    rows = []
    for i in range(a.examples):
        ex = tokenize_conversation(tok, synthetic_conversation(rng, i))
        rows.append({"input_ids": ex.input_ids, "labels": ex.labels})
    lengths = sorted(len(r["input_ids"]) for r in rows)
    data = datasets.Dataset.from_list(rows)
    print(f"torch threads: {torch.get_num_threads()}; LoRA r={cfg.train.lora_r} alpha={cfg.train.lora_alpha} "
          f"targets={cfg.train.target_modules} batch={cfg.train.batch_size}; {a.steps} steps per mode")  # fmt: skip
    print(
        f"examples: {len(rows)}, tokens min/median/max {lengths[0]}/{lengths[len(lengths) // 2]}/{lengths[-1]}"
    )

    results = []
    for mode in a.modes.split(","):
        try:
            results.append(run_mode(mode, model_path, data, cfg, a.steps, a.max_length))
        except Exception as exc:  # e.g. a mode this torch/transformers build cannot run on CPU
            print(f"{mode}: failed: {type(exc).__name__}: {exc}")
    base = next((r for r in results if r["mode"] == "padded"), results[0] if results else None)
    print(
        f"\n{'mode':14s} {'real tokens':>12s} {'seconds':>9s} {'tokens/s':>9s} {'vs padded':>10s} {'last loss':>10s}"
    )
    for r in results:
        print(f"{r['mode']:14s} {r['tokens']:12d} {r['seconds']:9.1f} {r['tok_s']:9.1f} "
              f"{r['tok_s'] / base['tok_s']:9.2f}x {r['loss']:10.3f}")  # fmt: skip
    padded = next((r for r in results if r["mode"] == "padded" and r["positions"]), None)
    if padded:
        # The dataloader pass covers one epoch; the share of padding is what matters.
        real = sum(lengths)
        print(f"padded batches: {padded['positions']} positions for {real} real tokens per epoch "
              f"({1 - real / padded['positions']:.1%} padding)")  # fmt: skip


if __name__ == "__main__":
    main()
