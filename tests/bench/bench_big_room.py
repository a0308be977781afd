"""Benchmark: one trajectory over a mission-scale room, end to end through the sandbox.

    python tests/bench/bench_big_room.py [--documents 5000 --tokens-per-document 16000]
                                         [--server-delay 2.0 --concurrency 256] [--skip-server]

The root is scripted with the worked example's program (the program the SFT
policy of `make distill` writes: every 2,000-token chunk to one llm_batch,
one paragraph per open finding, submit), so the figures measure the harness,
not a model's sampling. Run 1: extractive subagents. Printed: wall time,
peak host and worker memory (RSS, sampled), subagent calls, subagent
coverage, and, beside it, the time the extractive reader alone takes to read
the same prompts once in this process (the floor the trajectory is held to).
Run 2 (unless --skip-server): the same room with subagents on a local
OpenAI-compatible server that answers each call after --server-delay
seconds, --concurrency calls in flight; wall time against the ideal
ceil(calls / concurrency) x delay.
Targets: coverage >= 0.99, host peak <= 4 GiB, run 1 <= 2x the reader alone,
run 2 <= 1.25x ideal.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from bench_llm_batch import SlowServer

from pipeline.config import BackendConfig, HarnessConfig, SamplingConfig
from pipeline.grading.coverage import coverage_rows
from pipeline.harness.room_export import export_room
from pipeline.harness.root import run_episode
from pipeline.llm.base import make_backend
from pipeline.llm.extractive import extract
from pipeline.rooms.synthetic.generator import generate_room

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.doubles import ScriptedBackend  # noqa: E402


class PeakMemory:
    """Peak RSS of this process and, separately, of its child processes (the REPL worker), sampled."""

    def __init__(self, every_s: float = 0.2) -> None:
        self.every_s, self.host, self.children = every_s, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            self.host = max(self.host, me.memory_info().rss)
            kids = 0
            for c in me.children(recursive=True):
                try:
                    kids += c.memory_info().rss
                except psutil.Error:
                    pass
            self.children = max(self.children, kids)
            self._stop.wait(self.every_s)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def program() -> str:
    """The program-check ladder's `everything` rung: every chunk of the room in one llm_batch."""
    from pipeline.grading.program_check import load_ladder

    return "```python\n" + next(r.program for r in load_ladder() if r.name == "everything") + "```\n"


def trajectory(room, room_dir: Path, subagent_cfg: BackendConfig, concurrency: int):
    harness = HarnessConfig(
        prompt="worked_example",
        max_turns=1,
        cell_timeout_s=7200,
        episode_timeout_s=7200,
        batch_concurrency=concurrency,
    )

    async def run():
        sub = make_backend(subagent_cfg)
        try:
            return await run_episode(
                room,
                room_dir,
                ScriptedBackend([program()], context_tokens=10**6),
                sub,
                harness,
                SamplingConfig(),
                trajectory_id="t-bench",
                policy_id="scripted-worked-example",
            )
        finally:
            close = getattr(sub, "aclose", None)
            if close:
                await close()

    return asyncio.run(run())


def coverage(trace, room) -> float:
    total = next(
        r for r in coverage_rows(trace, room) if r["scope"] == "subagent" and r["grouping"] == "total"
    )
    return total["n_seen"] / total["n_probes"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--documents", type=int, default=5000)
    ap.add_argument("--tokens-per-document", type=int, default=16000)
    ap.add_argument("--server-delay", type=float, default=2.0)
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--skip-server", action="store_true")
    args = ap.parse_args()

    t0 = time.perf_counter()
    room = generate_room(
        "bench-big", seed=11, n_documents=args.documents, tokens_per_document=args.tokens_per_document
    )
    gen_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="bench-big-") as tmp:
        room_dir = export_room(room, Path(tmp) / room.name)
        print(
            f"room: {len(room.documents):,} documents, {room.n_tokens / 1e6:.1f}M tokens (generated in {gen_s:.0f} s)"
        )

        with PeakMemory() as mem:
            t0 = time.perf_counter()
            trace = trajectory(room, room_dir, BackendConfig(kind="extractive", concurrency=64), 64)
            wall = time.perf_counter() - t0
        assert trace.status == "submitted", trace.end_reason
        prompts = [c.prompt for c in trace.subcalls]
        t0 = time.perf_counter()
        for p in prompts:
            extract(p)
        reader_s = time.perf_counter() - t0
        cov = coverage(trace, room)
        errors = sum(c.error is not None for c in trace.subcalls)
        print(f"run 1, extractive subagents: {len(prompts):,} calls ({errors} errors), "
              f"{sum(map(len, prompts)) / 2**20:.0f} MiB of prompts through one llm_batch")  # fmt: skip
        print(f"  wall time                {wall:8.1f} s   the reader alone {reader_s:.1f} s: "
              f"{wall / reader_s:.2f}x (target <= 2x)")  # fmt: skip
        print(f"  peak host RSS            {mem.host / 2**30:8.2f} GiB (target <= 4 GiB)")
        print(f"  peak worker RSS          {mem.children / 2**30:8.2f} GiB (children of this process)")
        print(f"  subagent coverage        {cov:8.3f}   (target >= 0.99)")
        del prompts

        if args.skip_server:
            return
        with SlowServer(args.server_delay) as server:
            cfg = BackendConfig(
                kind="openai", base_url=server.url, model="bench", concurrency=args.concurrency, max_retries=0
            )
            t0 = time.perf_counter()
            trace2 = trajectory(room, room_dir, cfg, args.concurrency)
            wall2 = time.perf_counter() - t0
        calls = len(trace2.subcalls)
        ideal = math.ceil(calls / args.concurrency) * args.server_delay
        errors = sum(c.error is not None for c in trace2.subcalls)
        print(
            f"run 2, subagents on a server answering after {args.server_delay:.1f} s, {args.concurrency} in flight:"
        )
        print(f"  {calls:,} calls ({errors} errors), wall {wall2:.1f} s, ideal {ideal:.1f} s: "
              f"{wall2 / ideal:.2f}x (target <= 1.25x)")  # fmt: skip


if __name__ == "__main__":
    main()
