"""OpenAI-compatible backend: unit tests against a small aiohttp server, one against real `transformers serve`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections import Counter

import pytest
from aiohttp import web

from pipeline.config import BackendConfig
from pipeline.llm.base import ContextLimitError, GenerationParams, make_backend
from pipeline.llm.openai_backend import BackendError, OpenAIBackend, ServerUnavailable


class FakeServer:
    """Answers chat completions; the user message picks the behaviour.

    ``"500:2 ..."``: the first 2 attempts get HTTP 500, then success;
    ``"429:1 ..."``: likewise with 429 (and ``Retry-After: 0``);
    ``"hang:1 ..."``: the first attempt sleeps past the test's timeout;
    ``"400 ..."``: always HTTP 400; ``"ctx ..."``: a vLLM-style context-length 400;
    ``"slow ..."``: answers after 50 ms; ``"vllmstop ..."``: answers as vLLM does when a stop
    string matched (dropped from the text, named in ``stop_reason``) and with ``reasoning_content``;
    anything else answers at once, with plain JSON (as a server that ignores ``stream`` does).

    Streamed (server-sent events, when the request asks for it): ``"sse ..."`` streams the
    echo word by word with a vLLM-style stop and usage chunk; ``"trickle ..."`` streams its
    chunks 0.1 s apart (longer in all than the test's read timeout, never silent that long);
    ``"ssecut:1 ..."`` drops the first stream before its end; ``"sseerr:1 ..."`` sends an error
    chunk after the 200, as vLLM does when its engine fails mid-reply.
    """

    def __init__(self) -> None:
        self.attempts: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.bodies: list[dict] = []
        self.headers: list[dict] = []

    async def stream(self, request: web.Request, body: dict, kind: str, failing: bool) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)

        async def send(obj) -> None:
            await resp.write(f"data: {json.dumps(obj)}\n\n".encode())

        words = f"echo: {body['messages'][-1]['content']}".split(" ")
        await send(
            {"model": "served", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
        )
        for i, w in enumerate(words):
            if kind == "trickle":
                await asyncio.sleep(0.1)
            delta = {"content": (" " if i else "") + w, "reasoning_content": "r" if i == 0 else None}
            await send({"model": "served", "choices": [{"index": 0, "delta": delta}]})
            if i == 1 and failing and kind in ("ssecut", "sseerr"):
                if kind == "sseerr":
                    await send({"error": {"message": "EngineCore encountered an issue", "code": 500}})
                return resp  # ends with no finish_reason and no [DONE]
        stop = (body.get("stop") or [None])[0] if kind == "sse" else None  # "sse" ends on its stop string
        await send({"model": "served", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop", "stop_reason": stop}]})  # fmt: skip
        await send(
            {
                "model": "served",
                "choices": [],
                "usage": {"prompt_tokens": 11, "completion_tokens": len(words)},
            }
        )
        await resp.write(b"data: [DONE]\n\n")
        return resp

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        content = body["messages"][-1]["content"]
        self.attempts[content] += 1
        n = self.attempts[content]
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            word = content.split()[0]
            kind, _, times = word.partition(":")
            failing = times.isdigit() and n <= int(times)
            if kind in ("sse", "trickle", "ssecut", "sseerr") and body.get("stream"):
                return await self.stream(request, body, kind, failing)
            if kind == "500" and failing:
                return web.Response(status=500, text="internal error")
            if kind == "429" and failing:
                return web.Response(status=429, text="slow down", headers={"Retry-After": "0"})
            if kind == "hang" and failing:
                await asyncio.sleep(1.5)  # past the tests' timeouts, short enough for a quick shutdown
            if kind == "400":
                return web.Response(status=400, text='{"error": "bad request"}')
            if kind == "ctx":
                return web.Response(
                    status=400, text='{"message": "This model\'s maximum context length is 10 tokens"}'
                )
            if kind == "slow":
                await asyncio.sleep(0.05)
            if kind == "vllmstop":
                return web.json_response(
                    {
                        "model": body.get("model", "served"),
                        "choices": [{"index": 0, "finish_reason": "stop", "stop_reason": body["stop"][0],
                                     "message": {"role": "assistant", "content": "print(1)",
                                                 "reasoning_content": "the user wants code"}}],
                        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
                    }
                )  # fmt: skip
            return web.json_response(
                {
                    "model": body.get("model", "served"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": f"echo: {content}"},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
                }
            )  # fmt: skip
        finally:
            self.in_flight -= 1


@contextlib.asynccontextmanager
async def serve(fake: FakeServer):
    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        await runner.cleanup()


def backend(url: str, **kw) -> OpenAIBackend:
    cfg = BackendConfig(kind="openai", base_url=url, model=kw.pop("model", "sub-lora"), **kw)
    return OpenAIBackend(cfg, backoff_base_s=0.01, backoff_max_s=0.05)


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


P = GenerationParams(max_tokens=16, temperature=0.0, stop=["```\n"], seed=3)


def test_success_parses_usage_and_sends_params(monkeypatch):
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-test")

    async def main():
        fake = FakeServer()
        async with serve(fake) as url:
            b = backend(url, api_key_env="TEST_OPENAI_KEY")
            comp = await b.complete(user("hello"), P)
            await b.aclose()
        return fake, comp

    fake, comp = asyncio.run(main())
    assert comp.text == "echo: hello"
    assert (comp.prompt_tokens, comp.completion_tokens) == (11, 3)
    assert comp.model == "sub-lora" and comp.finish_reason == "stop"
    body = fake.bodies[0]
    assert body["model"] == "sub-lora" and body["stop"] == ["```\n"] and body["seed"] == 3
    assert body["max_tokens"] == 16 and body["temperature"] == 0.0
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert fake.headers[0]["Authorization"] == "Bearer sk-test"


def test_send_seed_false_leaves_the_seed_out():
    async def main():
        fake = FakeServer()
        async with serve(fake) as url:
            b = backend(url, send_seed=False)
            await b.complete(user("hello"), P)
            await b.aclose()
        return fake

    body = asyncio.run(main()).bodies[0]
    assert "seed" not in body and body["temperature"] == 0.0


def test_retries_500_and_429_then_succeeds():
    async def main():
        fake = FakeServer()
        async with serve(fake) as url:
            b = backend(url, max_retries=3)
            a, c = await asyncio.gather(b.complete(user("500:2 a"), P), b.complete(user("429:1 c"), P))
            await b.aclose()
        return fake, b, a, c

    fake, b, a, c = asyncio.run(main())
    assert a.text == "echo: 500:2 a" and c.text == "echo: 429:1 c"
    assert fake.attempts["500:2 a"] == 3 and fake.attempts["429:1 c"] == 2
    assert b.retries == 3


def test_gives_up_after_max_retries_with_clear_error():
    async def main():
        fake = FakeServer()
        async with serve(fake) as url:
            b = backend(url, max_retries=2)
            with pytest.raises(BackendError, match=r"failed after 3 attempts: HTTP 500"):
                await b.complete(user("500:99 z"), P)
            await b.aclose()
        return fake

    assert asyncio.run(main()).attempts["500:99 z"] == 3


def test_client_errors_are_not_retried():
    async def main():
        fake = FakeServer()
        async with serve(fake) as url:
            b = backend(url, max_retries=3)
            with pytest.raises(BackendError, match="HTTP 400"):
                await b.complete(user("400 q"), P)
            with pytest.raises(ContextLimitError, match="maximum context length"):
                await b.complete(user("ctx q"), P)
            await b.aclose()
        return fake

    fake = asyncio.run(main())
    assert fake.attempts["400 q"] == 1 and fake.attempts["ctx q"] == 1


def test_timeout_is_retried():
    async def main():
        fake = FakeServer()
        async with serve(fake) as url:
            b = backend(url, timeout_s=0.3, max_retries=1)
            comp = await b.complete(user("hang:1 t"), P)
            b2 = backend(url, timeout_s=0.2, max_retries=0)
            with pytest.raises(BackendError, match="no reply from the server for 0.2s"):
                await b2.complete(user("hang:5 u"), P)
            await b.aclose()
            await b2.aclose()
        return fake, comp

    fake, comp = asyncio.run(main())
    assert comp.text == "echo: hang:1 t" and fake.attempts["hang:1 t"] == 2


def test_connection_refused_is_retried_then_reported():
    with socket.socket() as s:  # a port nobody listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    b = backend(f"http://127.0.0.1:{port}/v1", max_retries=2)

    async def main():
        with pytest.raises(ServerUnavailable, match="failed after 3 attempts: connection error"):
            await b.complete(user("x"), P)
        await b.aclose()

    asyncio.run(main())
    assert b.retries == 2


def test_concurrency_limit_is_respected():
    async def main():
        fake = FakeServer()
        async with serve(fake) as url:
            b = backend(url, concurrency=4)
            out = await asyncio.gather(*[b.complete(user(f"slow {i}"), P) for i in range(20)])
            await b.aclose()
        return fake, out

    fake, out = asyncio.run(main())
    assert [c.text for c in out] == [f"echo: slow {i}" for i in range(20)]
    assert fake.max_in_flight == 4


def test_context_limit_refused_before_sending():
    async def main():
        fake = FakeServer()
        async with serve(fake) as url:
            b = backend(url, context_tokens=100)
            with pytest.raises(ContextLimitError, match="100-token context"):
                await b.complete(user("word " * 200), P)
            await b.aclose()
        return fake

    assert asyncio.run(main()).bodies == []


def test_registry_and_config_errors():
    b = make_backend(BackendConfig(kind="openai", base_url="http://127.0.0.1:1/v1/", model="m"))
    assert isinstance(b, OpenAIBackend) and b.url == "http://127.0.0.1:1/v1/chat/completions"
    with pytest.raises(ValueError, match="base_url"):
        make_backend(BackendConfig(kind="openai"))


@pytest.mark.slow
def test_real_transformers_serve(transformers_server):
    cfg = BackendConfig(kind="openai", base_url=transformers_server.base_url, model=transformers_server.model,
                        timeout_s=120, max_retries=1)  # fmt: skip

    async def main():
        b = make_backend(cfg)
        try:
            return await asyncio.gather(
                b.complete(user("Say hello in one short sentence."), GenerationParams(max_tokens=12)),
                b.complete(user("Name a colour."), GenerationParams(max_tokens=12)),
            )
        finally:
            await b.aclose()

    for comp in asyncio.run(main()):
        assert comp.text.strip()
        assert comp.prompt_tokens > 5 and 0 < comp.completion_tokens <= 12
        assert comp.finish_reason in ("stop", "length")
    # The response is valid JSON all the way through (parse once more for the record).
    json.dumps(comp.__dict__)


def test_a_stop_string_the_server_dropped_is_put_back_and_reasoning_kept():
    """One behaviour for the harness: completions end with the stop string that ended them."""

    async def main():
        async with serve(FakeServer()) as url:
            b = backend(url)
            comp = await b.complete(user("vllmstop x"), GenerationParams(max_tokens=8, stop=["\n```\n"]))
            plain = await b.complete(user("plain x"), GenerationParams(max_tokens=8, stop=["\n```\n"]))
            await b.aclose()
            return comp, plain

    comp, plain = asyncio.run(main())
    assert comp.text == "print(1)\n```\n" and comp.reasoning == "the user wants code"
    assert plain.text == "echo: plain x" and plain.reasoning == ""  # no stop_reason: left as it is


def test_streamed_reply_is_assembled_with_stop_usage_and_reasoning():
    async def main():
        fake = FakeServer()
        async with serve(fake) as url:
            b = backend(url)
            comp = await b.complete(user("sse one two"), GenerationParams(max_tokens=8, stop=["\n```\n"]))
            await b.aclose()
        return fake, comp

    fake, comp = asyncio.run(main())
    assert comp.text == "echo: sse one two\n```\n"  # the stop string the stream named, put back
    assert (comp.prompt_tokens, comp.completion_tokens) == (11, 4)
    assert comp.reasoning == "r" and comp.finish_reason == "stop" and comp.model == "served"
    assert fake.attempts["sse one two"] == 1


def test_a_slow_stream_that_keeps_sending_is_never_cut():
    """The read timeout counts silence: a reply of 0.5 s at 0.1 s a chunk passes a 0.3 s timeout."""

    async def main():
        fake = FakeServer()
        async with serve(fake) as url:
            b = backend(url, timeout_s=0.3, max_retries=0)
            comp = await b.complete(user("trickle a b c"), P)
            await b.aclose()
        return fake, comp

    fake, comp = asyncio.run(main())
    assert comp.text == "echo: trickle a b c" and comp.latency_s > 0.45
    assert fake.attempts["trickle a b c"] == 1


def test_a_stream_that_breaks_or_reports_an_error_is_retried():
    async def main():
        fake = FakeServer()
        async with serve(fake) as url:
            b = backend(url, max_retries=1)
            cut = await b.complete(user("ssecut:1 x y"), P)
            err = await b.complete(user("sseerr:1 x y"), P)
            b0 = backend(url, max_retries=0)
            with pytest.raises(BackendError, match="error in stream: .*EngineCore"):
                await b0.complete(user("sseerr:9 z"), P)
            await b.aclose()
            await b0.aclose()
        return fake, cut, err

    fake, cut, err = asyncio.run(main())
    assert cut.text == "echo: ssecut:1 x y" and err.text == "echo: sseerr:1 x y"
    assert fake.attempts["ssecut:1 x y"] == 2 and fake.attempts["sseerr:1 x y"] == 2


def test_stream_false_sends_a_plain_request():
    async def main():
        fake = FakeServer()
        async with serve(fake) as url:
            b = backend(url, stream=False)
            comp = await b.complete(user("sse plain"), P)
            await b.aclose()
        return fake, comp

    fake, comp = asyncio.run(main())
    assert "stream" not in fake.bodies[0] and comp.text == "echo: sse plain"
