"""Benchmark: a trained policy served as a runtime LoRA module vs as merged weights loaded in place.

    python tests/bench/bench_adapter_serving.py [--requests 10] [--tokens 128]

Makes a LoRA adapter for the embedded SmolLM2 as SFT leaves it (r=16, all linear layers, B not zero),
then, with the default recipe's vLLM (pipeline.serving), in one run:

1. ``serve.adapters: lora``: the adapter loaded as a runtime module; a burst of ``--requests`` long
   prompts (about 1,500 tokens, as a root's turn) sampled under the module, and the same under the base;
2. ``serve.adapters: merged``: the adapter merged and loaded in place (pipeline.policies.serve_policy,
   timed), and the same burst.

Prints each burst's completion tokens per second and the ratios merged / LoRA and merged / base. The
held-out evaluation and RL rollouts sample trained policies; this is what ``auto`` picks on a CPU for.
(needs `make vllm-env`)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pipeline.config import load_config  # noqa: E402
from pipeline.policies import base_policy, serve_policy, served_name  # noqa: E402
from pipeline.serving import running_servers  # noqa: E402
from tests.conftest import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
WORDS = "the seller shall indemnify the buyer against losses from any breach of covenant or warranty".split()


def make_adapter(out: Path) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from pipeline.llm.smollm2 import ensure_model

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(ensure_model(), dtype=torch.float32)
    peft = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear"))
    for name, w in peft.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(w, std=0.002)  # a trained adapter's size, not far enough to derail decoding
    peft.save_pretrained(out)


def burst(cfg, policy, n: int, tokens: int) -> float:
    """Completion tokens per second of ``n`` seeded requests at once, each exactly ``tokens`` long."""
    rng = random.Random(0)
    prompts = [" ".join(rng.choice(WORDS) for _ in range(1100)) + "\nSummarise the risks." for _ in range(n)]
    url = f"{cfg.models.root.base_url}/completions"
    model = served_name(policy, cfg)

    def one(i: int) -> int:
        body = {"model": model, "prompt": prompts[i], "max_tokens": tokens, "temperature": 0.6, "top_p": 0.9}
        resp = requests.post(url, json={**body, "seed": i, "ignore_eos": True}, timeout=1800)
        resp.raise_for_status()
        return resp.json()["usage"]["completion_tokens"]

    t0 = time.perf_counter()
    with ThreadPoolExecutor(n) as pool:
        done = sum(pool.map(one, range(n)))
    return done / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10)
    ap.add_argument("--tokens", type=int, default=128)
    args = ap.parse_args()
    tps, load_s = {}, None
    with tempfile.TemporaryDirectory() as tmp:
        make_adapter(Path(tmp) / "run" / "adapter")
        for mode in ("lora", "merged"):
            port = free_port()
            cfg = load_config(
                "default",
                [
                    f"run.dir={tmp}/run",
                    f"models.root.base_url=http://127.0.0.1:{port}/v1",
                    f"serve.python={ROOT / '.venv-vllm' / 'bin' / 'python'}",
                    f"serve.adapters={mode}",
                ],
            )
            base = base_policy(cfg)
            trained = dataclasses.replace(base, adapter="adapter", parent_id=base.policy_id)
            with running_servers(cfg):
                burst(cfg, base, 2, 8)  # warm-up
                if mode == "lora":
                    tps["base"] = burst(cfg, base, args.requests, args.tokens)
                t0 = time.perf_counter()
                serve_policy(trained, cfg)
                if mode == "merged":
                    load_s = time.perf_counter() - t0
                tps[mode] = burst(cfg, trained, args.requests, args.tokens)
    print(
        f"{args.requests} seeded requests of ~1,500 prompt tokens, {args.tokens} tokens each, {os.cpu_count()} cores:"
    )
    for k, v in tps.items():
        print(f"  {k:7s} {v:6.1f} completion tokens/s")
    print(f"  merge + load in place: {load_s:.1f} s")
    print(
        f"  merged / LoRA x{tps['merged'] / tps['lora']:.2f}; merged / base x{tps['merged'] / tps['base']:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
