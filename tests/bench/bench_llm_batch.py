"""Benchmark: 1,000 subagent calls through llm_batch against a 50 ms OpenAI-compatible server.

A local aiohttp server answers every chat completion after 50 ms. The same
1,000 prompts go, at concurrency 64, through

1. ``SubagentRunner.batch`` over the ``openai`` backend (host side only);
2. a real ``Sandbox`` cell calling ``llm_batch`` (worker process -> host ->
   runner), when pipeline/harness/sandbox.py is present;
3. the reference RLM package ``rlms`` (``LocalREPL`` + ``LMHandler``, whose
   ``llm_query_batched`` runs the prompts through the openai SDK's async
   client under a semaphore of ``batch_max_concurrent``), when installed.

Ideal wall time = ceil(1000 / 64) * 0.05 s = 0.8 s; target <= 1.25x ideal.

Run: python tests/bench/bench_llm_batch.py [--calls 1000] [--concurrency 64] [--delay 0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import multiprocessing
import socket
import sys
import tempfile
import time
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pipeline.config import BackendConfig  # noqa: E402
from pipeline.harness.subagents import SubagentRunner  # noqa: E402
from pipeline.llm.base import GenerationParams  # noqa: E402
from pipeline.llm.openai_backend import OpenAIBackend  # noqa: E402

TARGET_RATIO = 1.25


async def _handle(request: web.Request) -> web.Response:
    app = request.app
    body = await request.json()
    app["state"]["requests"] += 1
    await asyncio.sleep(app["delay"])
    content = body["messages"][-1]["content"]
    return web.json_response(
        {
            "id": f"cmpl-{app['state']['requests']}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "bench"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": f"answer to {content}"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 8, "completion_tokens": 4, "total_tokens": 12},
        }
    )  # fmt: skip


def _serve(delay: float, port_queue: multiprocessing.Queue) -> None:
    app = web.Application()
    app["delay"], app["state"] = delay, {"requests": 0}
    app.router.add_post("/v1/chat/completions", _handle)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port_queue.put(sock.getsockname()[1])
    web.run_app(app, sock=sock, access_log=None, print=None, backlog=1024)


class SlowServer:
    """An OpenAI-compatible chat endpoint answering after ``delay`` s, in its own process.

    A separate process, so the server's CPU time does not share the client's GIL.
    """

    def __init__(self, delay: float) -> None:
        self._queue: multiprocessing.Queue = multiprocessing.Queue()
        self._proc = multiprocessing.Process(target=_serve, args=(delay, self._queue), daemon=True)
        self.url = ""

    def __enter__(self) -> SlowServer:
        self._proc.start()
        port = self._queue.get(timeout=30)
        self.url = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 30
        while True:  # wait until it accepts connections
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self._proc.terminate()
        self._proc.join(10)


def make_runner(url: str, concurrency: int, calls: int) -> tuple[OpenAIBackend, SubagentRunner]:
    backend = OpenAIBackend(
        BackendConfig(kind="openai", base_url=url, model="bench", concurrency=concurrency)
    )
    runner = SubagentRunner(
        backend,
        GenerationParams(max_tokens=16),
        concurrency=concurrency,
        max_calls=calls * 2,
        max_tokens=10**9,
        t0=time.monotonic(),
    )
    return backend, runner


async def bench_runner(url: str, prompts: list[str], concurrency: int) -> float:
    backend, runner = make_runner(url, concurrency, len(prompts))
    await runner.batch(prompts[:concurrency])  # warm the connection pool
    start = time.perf_counter()
    out = await runner.batch(prompts)
    wall = time.perf_counter() - start
    await backend.aclose()
    errors = [o for o in out if o.startswith("ERROR")]
    assert not errors and out[-1] == f"answer to {prompts[-1]}", errors[:3]
    return wall


async def bench_sandbox(url: str, prompts: list[str], concurrency: int, level: str = "auto") -> float | str:
    try:
        from pipeline.harness.room_export import export_room
        from pipeline.harness.sandbox import Sandbox, SandboxLimits
        from pipeline.rooms.model import Document, Room
    except ImportError as exc:
        return f"skipped (sandbox not available: {exc})"
    room = Room(
        name="bench-room",
        target={"name": "Bench Co"},
        deal={"type": "merger"},
        documents=[
            Document(path="01_corporate/charter.txt", category="corporate", title="Charter", text="Charter.")
        ],
    )
    backend, runner = make_runner(url, concurrency, len(prompts) + concurrency)

    async def on_llm(kind: str, payload: dict):
        if kind != "batch":
            raise ValueError(f"unexpected llm request {kind}")
        return await runner.batch(payload["prompts"])

    with tempfile.TemporaryDirectory() as tmp:
        room_dir = export_room(room, Path(tmp) / "room")
        async with Sandbox(room_dir, SandboxLimits(level=level), on_llm=on_llm) as sb:
            warm = await sb.run_cell(f"_w = llm_batch(['warm'] * {concurrency}); print(len(_w))")
            assert warm.error is None, warm.error
            code = (
                f"prompts = [f'prompt {{i}}' for i in range({len(prompts)})]\n"
                "res = llm_batch(prompts)\n"
                "print(len(res), sum(r.startswith('ERROR') for r in res))\n"
            )
            start = time.perf_counter()
            result = await sb.run_cell(code)
            wall = time.perf_counter() - start
    await backend.aclose()
    if result.error or result.output.split() != [str(len(prompts)), "0"]:
        return f"failed: {result.error or result.output}"
    return wall


def bench_rlms(url: str, prompts: list[str], concurrency: int) -> float | str:
    try:
        from rlm.clients.openai import OpenAIClient
        from rlm.core.lm_handler import LMHandler
        from rlm.environments.local_repl import LocalREPL
    except ImportError as exc:
        return f"skipped (pip install rlms to compare: {exc})"
    client = OpenAIClient(api_key="bench", model_name="bench", base_url=url)
    with LMHandler(client, batch_max_concurrent=concurrency) as handler:
        env = LocalREPL(lm_handler_address=handler.address, context_payload={"prompts": prompts})
        try:
            env.execute_code(f"_w = llm_query_batched(['warm'] * {concurrency})")
            start = time.perf_counter()
            result = env.execute_code("res = llm_query_batched(context['prompts'])\nprint(len(res))")
            wall = time.perf_counter() - start
        finally:
            env.cleanup()
    if result.stdout.strip() != str(len(prompts)):
        return f"failed: {result.stdout[-300:]} {result.stderr[-300:]}"
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--delay", type=float, default=0.05)
    args = ap.parse_args()
    prompts = [f"prompt {i}" for i in range(args.calls)]
    ideal = math.ceil(args.calls / args.concurrency) * args.delay
    print(f"{args.calls} calls, concurrency {args.concurrency}, server delay {args.delay * 1000:.0f} ms; "
          f"ideal {ideal:.3f} s, target <= {TARGET_RATIO}x ideal = {ideal * TARGET_RATIO:.3f} s")  # fmt: skip

    with SlowServer(args.delay) as server:
        results: dict[str, float | str] = {}
        results["SubagentRunner.batch"] = asyncio.run(bench_runner(server.url, prompts, args.concurrency))
        # The kernel layer's cost, side by side: every level this machine offers, strongest as the headline.
        from pipeline.harness import kernel_layer

        levels = kernel_layer.available_levels()
        by_level = {
            lv: asyncio.run(bench_sandbox(server.url, prompts, args.concurrency, lv)) for lv in levels
        }
        results["Sandbox cell llm_batch"] = by_level[levels[-1]]
        results["rlms llm_query_batched"] = bench_rlms(server.url, prompts, args.concurrency)

    for name, wall in results.items():
        if isinstance(wall, float):
            verdict = "ok" if wall <= ideal * TARGET_RATIO else "SLOWER THAN TARGET"
            print(f"  {name:<24} {wall:7.3f} s   {wall / ideal:5.2f}x ideal   {verdict}")
        else:
            print(f"  {name:<24} {wall}")
    ours, ref = results["SubagentRunner.batch"], results["rlms llm_query_batched"]
    if isinstance(ours, float) and isinstance(ref, float):
        print(f"  rlms / SubagentRunner wall time: {ref / ours:.2f}x")
    print("Sandbox cell llm_batch by kernel level (pipeline.harness.kernel_layer):")
    for lv, wall in by_level.items():
        if isinstance(wall, float) and isinstance(by_level["python"], float):
            print(f"  {lv:<14} {wall:7.3f} s   {wall / by_level['python']:5.2f}x the python level")
        else:
            print(f"  {lv:<14} {wall}")
    sandboxed = results["Sandbox cell llm_batch"]
    if isinstance(sandboxed, float) and isinstance(ref, float):
        print(f"  rlms / Sandbox cell wall time: {ref / sandboxed:.2f}x")


if __name__ == "__main__":
    main()
