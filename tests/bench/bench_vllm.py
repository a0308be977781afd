"""Benchmark: the root on the local transformers backend vs on a vLLM server (CPU), side by side.

The worked-example workload of `make distill`: the root settings of
pipeline/recipes/local.yaml against default.yaml (vLLM), on the same rooms
(3 rooms of 20 documents, 2 for training), the same prompt and sampling,
``--k`` trajectories per training room, extractive subagents. Each backend samples into its own
fresh warehouse; vLLM is started through pipeline.serving (as `pipeline
serve` does, prefix caching on) before its clock starts. Prints per backend:
wall time, trajectories per minute, root tokens/s (prompt + completion, and
completion only), and for vLLM the prefix-cache hit rate from its /metrics;
then the ratio vLLM / local. ``--dtypes bfloat16,float32`` runs one vLLM server per
``serve.dtype`` in turn and prints their ratio too (bf16 is emulated on a CPU without bf16
instructions); ``--no-local`` leaves the local backend out. ``--reserved-cpus 1,0`` runs one server per
value of VLLM_CPU_NUM_OF_RESERVED_CPU (1 is vLLM's own choice on x86: one core kept away from
the model for its scheduler, so on 2 cores the model decodes on one; auto: pipeline.serving's
rule, which is 0 on a CPU-only machine of at most 2 cores).

Run: python tests/bench/bench_vllm.py [--k 4] [--concurrency 8] [--dtypes auto] [--reserved-cpus auto]
[--no-local]
(needs `make vllm-env`)
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import requests  # noqa: E402

from pipeline import db, sampling  # noqa: E402
from pipeline.config import PipelineConfig, load_config  # noqa: E402
from pipeline.policies import base_policy, register_policy  # noqa: E402
from pipeline.rooms import store  # noqa: E402
from pipeline.serving import running_servers, server_dtype  # noqa: E402
from stages import rooms  # noqa: E402
from tests.conftest import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def sample(cfg: PipelineConfig, k: int) -> dict[str, float]:
    rooms.run(cfg)
    con = db.connect(cfg.run.db_path)
    try:
        policy = base_policy(cfg)
        register_policy(con, policy)
        names = store.room_names(con, split="train")
        t0 = time.perf_counter()
        counts = sampling.sample_policy(con, cfg, policy, names, k, "train", desc=cfg.models.root.kind)
        wall = time.perf_counter() - t0
        prompt, completion = con.execute(
            "select sum(root_prompt_tokens), sum(root_completion_tokens) from trajectories"
        ).fetchone()
    finally:
        con.close()
    return {
        "trajectories": counts["sampled"],
        "failed": counts["failed"],
        "wall_s": wall,
        "traj_per_min": 60 * counts["sampled"] / wall,
        "tokens_per_s": (prompt + completion) / wall,
        "completion_tokens_per_s": completion / wall,
    }


def prefix_cache_hit_rate(base_url: str) -> float | None:
    text = requests.get(base_url.removesuffix("/v1") + "/metrics", timeout=10).text

    def total(name: str) -> float:
        return sum(
            float(v) for v in re.findall(rf"^vllm:{name}_total(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.M)
        )

    queries = total("prefix_cache_queries")
    return total("prefix_cache_hits") / queries if queries else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument(
        "--dtypes", default="auto", help="comma-separated serve.dtype values, one vLLM server each"
    )
    ap.add_argument(
        "--reserved-cpus",
        default="auto",
        help="comma-separated VLLM_CPU_NUM_OF_RESERVED_CPU values (auto: pipeline.serving's rule), one "
        "vLLM server each",
    )
    ap.add_argument("--no-local", action="store_true", help="leave the local transformers backend out")
    args = ap.parse_args()
    # The two recipes' root settings (local.yaml, default.yaml), on small rooms.
    common = [
        "rooms.n_rooms=3",
        "rooms.n_documents=20",
        "rooms.size_spread=0.0",
        "rooms.heldout_fraction=0.25",
        f"sample.concurrency={args.concurrency}",
    ]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_local:
            local = load_config("local", [f"run.dir={tmp}/local", "models.root.max_batch=8", *common])
            results["local"] = sample(local, args.k)
        for dtype, reserved in itertools.product(args.dtypes.split(","), args.reserved_cpus.split(",")):
            port = free_port()
            vllm = load_config(
                "default",
                [
                    f"run.dir={tmp}/vllm-{dtype}-{reserved}",
                    *common,
                    f"models.root.base_url=http://127.0.0.1:{port}/v1",
                    f"models.root.concurrency={args.concurrency}",
                    f"serve.python={ROOT / '.venv-vllm' / 'bin' / 'python'}",
                    f"serve.dtype={dtype}",
                ],
            )
            assert vllm.models.root.kind == "openai" and vllm.serve.manage, "default.yaml: root on vLLM"
            env = {k: v for k, v in vllm.serve.env.items() if k != "VLLM_CPU_NUM_OF_RESERVED_CPU"}
            if reserved != "auto":
                env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = reserved
            vllm.serve.env = env
            name = f"vllm {server_dtype(dtype)}" + ("" if reserved == "auto" else f" rsv={reserved}")
            with running_servers(vllm):
                results[name] = sample(vllm, args.k)
                results[name]["prefix_cache_hit_rate"] = prefix_cache_hit_rate(vllm.models.root.base_url)
    print(f"\nworked-example workload: k={args.k} per training room, concurrency {args.concurrency}")
    print(f"{'backend':20s} {'traj':>5s} {'failed':>6s} {'wall s':>8s} {'traj/min':>9s} {'tok/s':>8s} "
          f"{'gen tok/s':>9s} {'prefix hits':>11s}")  # fmt: skip
    for name, r in results.items():
        hits = r.get("prefix_cache_hit_rate")
        print(
            f"{name:20s} {r['trajectories']:5d} {r['failed']:6d} {r['wall_s']:8.1f} {r['traj_per_min']:9.2f} "
            f"{r['tokens_per_s']:8.1f} {r['completion_tokens_per_s']:9.1f} "
            f"{'-' if hits is None else f'{hits:.0%}':>11s}"
        )
    served = [n for n in results if n != "local"]
    for name in served:
        if "local" in results:
            ratio = results[name]["traj_per_min"] / results["local"]["traj_per_min"]
            print(f"{name} / local trajectories per minute: {ratio:.2f}x")
    for name in served[1:]:
        ratio = results[name]["traj_per_min"] / results[served[0]]["traj_per_min"]
        print(f"{name} / {served[0]} trajectories per minute: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
