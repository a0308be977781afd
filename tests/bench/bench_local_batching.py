"""Benchmark: the local backend's request batching vs one request after another.

Eight concurrent trajectories' worth of generation (8 requests x 64 new
tokens, greedy, no stop string so every row runs its full length) through
the embedded SmolLM2-135M-Instruct:

- batched: the 8 ``complete()`` calls issued together (merged into one
  left-padded ``generate`` call by the backend's worker);
- sequential: the same 8 requests awaited one at a time.

Prints tokens/s of each and their ratio (target >= 2.5x).

Run: python tests/bench/bench_local_batching.py [--requests 8] [--tokens 64]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pipeline.config import BackendConfig  # noqa: E402
from pipeline.llm.base import GenerationParams  # noqa: E402
from pipeline.llm.local import LocalBackend  # noqa: E402

TARGET_RATIO = 2.5
TOPICS = ["indemnification caps", "change of control", "assignment clauses", "non-compete terms",
          "landlord consent", "expired permits", "data breach notification", "prepayment penalties"]  # fmt: skip


def prompts(n: int) -> list[list[dict[str, str]]]:
    return [
        [
            {
                "role": "user",
                "content": f"Explain what a buyer should check about {TOPICS[i % len(TOPICS)]} in a data room.",
            }
        ]
        for i in range(n)
    ]


async def run_batched(backend: LocalBackend, msgs: list, params: GenerationParams) -> tuple[float, int]:
    start = time.perf_counter()
    out = await asyncio.gather(*[backend.complete(m, params) for m in msgs])
    return time.perf_counter() - start, sum(c.completion_tokens for c in out)


async def run_sequential(backend: LocalBackend, msgs: list, params: GenerationParams) -> tuple[float, int]:
    start = time.perf_counter()
    tokens = 0
    for m in msgs:
        tokens += (await backend.complete(m, params)).completion_tokens
    return time.perf_counter() - start, tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--model", default="", help="model folder; default: the embedded SmolLM2-135M-Instruct")
    args = ap.parse_args()

    backend = LocalBackend(BackendConfig(kind="local", model=args.model, max_batch=args.requests))
    # min_new_tokens-like behaviour: suppress EOS so every row generates exactly --tokens.
    backend.model.generation_config.eos_token_id = None
    params = GenerationParams(max_tokens=args.tokens)
    msgs = prompts(args.requests)
    try:
        asyncio.run(run_sequential(backend, msgs[:1], GenerationParams(max_tokens=4)))  # warm-up
        calls_before = backend.generate_calls
        b_wall, b_tokens = asyncio.run(run_batched(backend, msgs, params))
        batched_calls = backend.generate_calls - calls_before
        s_wall, s_tokens = asyncio.run(run_sequential(backend, msgs, params))
    finally:
        backend.close()
    b_tps, s_tps = b_tokens / b_wall, s_tokens / s_wall
    print(f"{args.requests} requests x {args.tokens} new tokens, {backend.name}, torch threads "
          f"{__import__('torch').get_num_threads()}")  # fmt: skip
    print(
        f"  batched     {b_wall:7.2f} s  {b_tokens:5d} tokens  {b_tps:7.1f} tok/s  ({batched_calls} generate calls)"
    )
    print(
        f"  sequential  {s_wall:7.2f} s  {s_tokens:5d} tokens  {s_tps:7.1f} tok/s  ({args.requests} generate calls)"
    )
    ratio = b_tps / s_tps
    print(f"  batched / sequential throughput: {ratio:.2f}x (target >= {TARGET_RATIO}x) "
          f"{'ok' if ratio >= TARGET_RATIO else 'BELOW TARGET'}")  # fmt: skip


if __name__ == "__main__":
    main()
