"""Sampling against a subagent server that fails 30% of requests with 500s and lets 10% time out."""

import asyncio
import random
import threading

from aiohttp import web

from pipeline import db
from pipeline.config import load_config
from stages import rooms, sample
from tests.conftest import free_port
from tests.stages import sample_driver


def _serve(port: int, stop: threading.Event) -> None:
    rng = random.Random(0)

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        roll = rng.random()
        if roll < 0.30:
            return web.json_response({"error": "overloaded"}, status=500)
        if roll < 0.40:
            await asyncio.sleep(3.0)  # longer than the client's timeout
        lines = body["messages"][-1]["content"].splitlines()
        text = next(x for x in lines if x.startswith("=== "))  # the document's header line
        return web.json_response(
            {
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": f"Finding in {text}"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
            }
        )

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        while not stop.is_set():
            await asyncio.sleep(0.05)
        await runner.cleanup()

    asyncio.run(main())


def test_flaky_subagents_still_finish_and_failures_are_recorded(tmp_path):
    port = free_port()
    stop = threading.Event()
    server = threading.Thread(target=_serve, args=(port, stop), daemon=True)
    server.start()
    try:
        cfg = load_config(
            "tiny",
            [
                f"run.dir={tmp_path}",
                "rooms.n_rooms=1",
                "rooms.heldout_fraction=0.0",
                *sample_driver.OVERRIDES,
                "sample.k=2",
                "models.subagent.kind=openai",
                f"models.subagent.base_url=http://127.0.0.1:{port}/v1",
                "models.subagent.model=sub",
                "models.subagent.timeout_s=0.5",
                "models.subagent.max_retries=1",
            ],
        )
        rooms.run(cfg)
        counts = sample.run(cfg)
    finally:
        stop.set()
        server.join(timeout=10)
    assert counts["sampled"] == 2
    con = db.connect(cfg.run.db_path)
    assert [s for (s,) in con.execute("select status from trajectories").fetchall()] == [
        "submitted",
        "submitted",
    ]
    ok, failed = con.execute(
        "select count(*) filter (where error is null), count(*) filter (where error is not null) "
        "from subcalls"
    ).fetchone()
    assert ok + failed == 40  # 20 documents x 2 trajectories, every call recorded
    assert failed > 0 and ok > failed  # two attempts each: most calls get through, some fail twice
    errors = [e for (e,) in con.execute("select error from subcalls where error is not null").fetchall()]
    assert any("500" in e for e in errors) or any("imeout" in e for e in errors), errors[:3]
    # failed items reached the REPL as "ERROR: ..." strings in their place (this program keeps them)
    memos = [m for (m,) in con.execute("select memo from trajectories").fetchall()]
    assert sum(p.startswith("ERROR") for m in memos for p in m.split("\n\n")) == failed
    assert sum(p.startswith("Finding in ===") for m in memos for p in m.split("\n\n")) == ok
