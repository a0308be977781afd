"""LLM judge: strict parsing, retries, ungraded criteria, the warehouse cache.

The main test talks to a small aiohttp server in the OpenAI chat-completions
shape through the real OpenAI-compatible backend; the server answers per
criterion text, so batches behave predictably whatever order they arrive in.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from aiohttp import web

from pipeline import db
from pipeline.config import BackendConfig
from pipeline.grading.llm_judge import JudgeCache, judge_memo, memo_hash, parse_verdicts
from pipeline.llm.base import make_backend
from pipeline.rooms.model import Criterion
from tests.doubles import ScriptedBackend

MEMO = "The Acme MSA (03_material_contracts/msa.txt) lets the customer terminate on a change of control."


def _openai_backend(base_url: str):
    cfg = BackendConfig(kind="openai", base_url=base_url, model="judge-model", max_retries=0, timeout_s=10)
    return make_backend(cfg)  # imports only the openai backend


class JudgeServer:
    """Chat-completions server that answers per criterion text.

    Texts containing ALWAYS-BAD make the whole reply invalid JSON; FLAKY makes
    it invalid the first time that text is seen; OMIT leaves that criterion
    out of an otherwise valid reply; "pass-me" passes, anything else fails.
    Valid replies alternate between bare JSON and a ```json fence.
    """

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.seen: set[str] = set()

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        user = body["messages"][-1]["content"]
        items = re.findall(r"^\[(\d+)\] (.*)$", user, flags=re.MULTILINE)
        bad = any("ALWAYS-BAD" in t for _, t in items)
        flaky = [t for _, t in items if "FLAKY" in t and t not in self.seen]
        self.seen.update(t for _, t in items)
        if bad or flaky:
            content = 'Sure! Here are the verdicts: {"verdicts": [{"id": "1", "pass": tru'
        else:
            verdicts = [
                {"id": i, "pass": "pass-me" in t, "reason": f"checked {i}"}
                for i, t in items
                if "OMIT" not in t
            ]
            content = json.dumps({"verdicts": verdicts})
            if len(self.requests) % 2:
                content = f"```json\n{content}\n```"
        return web.json_response(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": body.get("model", "judge-model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
            }
        )


async def _with_server(fn):
    server = JudgeServer()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)  # port 0: a free port
    await site.start()
    port = runner.addresses[0][1]
    backend = _openai_backend(f"http://127.0.0.1:{port}/v1")
    try:
        return await fn(backend, server)
    finally:
        await backend.aclose()
        await runner.cleanup()


def _crit(cid: str, text: str, **kw) -> Criterion:
    return Criterion(criterion_id=cid, kind="identify", text=text, **kw)


CRITERIA = [
    # batch 1: valid at once
    _crit("c1", "pass-me: the memo names the change-of-control clause", entities=["SecretEntityXYZ"]),
    _crit("c2", "the memo quantifies the termination fee"),
    # batch 2: invalid once, then valid
    _crit("c3", "FLAKY pass-me: cites the MSA"),
    _crit("c4", "FLAKY recommends a consent letter"),
    # batch 3: always invalid -> both ungraded after 3 attempts
    _crit("c5", "ALWAYS-BAD flags the decoy"),
    _crit("c6", "pass-me: connects the MSA to the revenue concentration"),
    # batch 4: c8 valid at once, c7 never answered -> asked alone twice more, then ungraded
    _crit("c7", "OMIT notes the missing board consent"),
    _crit("c8", "pass-me: names the customer"),
]


def test_judge_memo_retries_ungraded_and_cache(tmp_path):
    con = db.connect(tmp_path / "w.duckdb")
    cache = JudgeCache(con)

    async def scenario(backend, server):
        first = await judge_memo(
            backend,
            MEMO,
            CRITERIA,
            judge_name="llm:judge-model",
            criteria_per_call=2,
            max_attempts=3,
            cache=cache,
        )
        n_first = len(server.requests)
        graded = [c for c in CRITERIA if c.criterion_id in {"c1", "c2", "c3", "c4", "c8"}]
        again = await judge_memo(
            backend, MEMO, graded, judge_name="llm:judge-model", criteria_per_call=2, cache=cache
        )
        n_again = len(server.requests) - n_first
        other = await judge_memo(
            backend,
            MEMO + " Also.",
            CRITERIA[:2],
            judge_name="llm:judge-model",
            criteria_per_call=2,
            cache=cache,
        )
        return first, n_first, again, n_again, other, server

    first, n_first, again, n_again, other, server = asyncio.run(_with_server(scenario))

    by_id = {cid: (passed, reason) for cid, passed, reason in first}
    assert [cid for cid, _, _ in first] == [c.criterion_id for c in CRITERIA]  # input order kept
    assert by_id["c1"][0] is True and by_id["c2"][0] is False
    assert by_id["c3"][0] is True and by_id["c4"][0] is False  # graded on the retry
    assert by_id["c8"][0] is True
    for cid in ("c5", "c6", "c7"):
        passed, reason = by_id[cid]
        assert passed is None, cid
        assert reason.startswith("ungraded after 3 attempts"), reason
    assert "invalid JSON" in by_id["c5"][1]
    assert "no verdict for id" in by_id["c7"][1]
    assert by_id["c1"][1] == "checked 1"
    # batch1: 1 request, batch2: 2, batch3: 3, batch4: 1 + 2 retries of c7 alone.
    assert n_first == 9
    retries_of_c7 = [r for r in server.requests if "OMIT" in r["messages"][-1]["content"]]
    assert len(retries_of_c7) == 3
    assert all("pass-me: names the customer" not in r["messages"][-1]["content"] for r in retries_of_c7[1:])

    # Only criterion texts reach the judge, never the reference judge's machine fields.
    assert all("SecretEntityXYZ" not in json.dumps(r) for r in server.requests)
    assert all(r["model"] == "judge-model" for r in server.requests)

    # Cache: the graded criteria of an unchanged memo cost no request; a changed memo does.
    assert n_again == 0
    assert again == [(cid, by_id[cid][0], by_id[cid][1]) for cid in ("c1", "c2", "c3", "c4", "c8")]
    assert [v[1] for v in other] == [True, False]
    rows = con.execute(
        "select criterion_id, passed from judge_cache order by memo_hash, criterion_id"
    ).fetchall()
    # Ungraded verdicts are not cached (a rerun tries them again).
    assert len(rows) == 5 + 2
    assert con.execute(
        "select count(*) from judge_cache where memo_hash = ? and passed is null", [memo_hash(MEMO)]
    ).fetchone() == (0,)


def test_parse_verdicts_strict():
    ok, problems = parse_verdicts(
        '```json\n{"verdicts": [{"id": "1", "pass": true, "reason": "yes"}]}\n```', ["1"]
    )
    assert ok == {"1": (True, "yes")} and problems == {}
    text = json.dumps(
        {
            "verdicts": [
                {"id": 2, "pass": False, "reason": "no\n  really"},  # an integer id is accepted
                {"id": "3", "pass": "true", "reason": "x"},  # a string is not a boolean
                {"id": "4", "pass": True, "reason": "a"},
                {"id": "4", "pass": False, "reason": "b"},  # duplicate: neither counts
                {"id": "99", "pass": True, "reason": "unknown id"},
                "not an object",
            ]
        }
    )
    ok, problems = parse_verdicts(text, ["1", "2", "3", "4"])
    assert ok == {"2": (False, "no really")}
    assert problems["1"] == "no verdict for id 1"
    assert '"pass" must be true or false' in problems["3"]
    assert "duplicate" in problems["4"]
    from pipeline.grading.llm_judge import JudgeResponseError

    for bad in ("", "verdicts: yes", '{"verdicts": {}}', '[{"id": "1"}]', 'Here: {"verdicts": []}'):
        with pytest.raises(JudgeResponseError):
            parse_verdicts(bad, ["1"])


def test_memo_over_judge_context_is_ungraded_without_retry():
    backend = ScriptedBackend(["never used"], context_tokens=50)
    out = asyncio.run(
        judge_memo(backend, "word " * 400, CRITERIA[:3], judge_name="llm:x", criteria_per_call=8)
    )
    assert [p for _, p, _ in out] == [None, None, None]
    assert "context" in out[0][2]
    assert len(backend.calls) == 1


def test_bad_arguments_are_clear_errors():
    backend = ScriptedBackend([])
    with pytest.raises(ValueError, match="criteria_per_call"):
        asyncio.run(judge_memo(backend, MEMO, CRITERIA, judge_name="llm:x", criteria_per_call=0))
    with pytest.raises(ValueError, match="duplicate criterion ids"):
        asyncio.run(judge_memo(backend, MEMO, [CRITERIA[0], CRITERIA[0]], judge_name="llm:x"))


@pytest.mark.slow
def test_real_transformers_server_verdicts_are_bools_or_ungraded(request, tmp_path):
    try:
        server = request.getfixturevalue("transformers_server")
    except pytest.FixtureLookupError:
        pytest.skip("tests/conftest.py has no transformers_server fixture yet")
    # Two criteria, short replies: a 135M model on a shared CPU is slow, and invalid JSON is fine here.
    criteria = CRITERIA[:2]
    cfg = BackendConfig(
        kind="openai", base_url=server.base_url, model=server.model, timeout_s=300, max_retries=1
    )
    backend = make_backend(cfg)

    async def go():
        try:
            return await judge_memo(
                backend,
                MEMO,
                criteria,
                judge_name=f"llm:{server.model}",
                criteria_per_call=2,
                max_attempts=2,
                max_tokens=96,
            )
        finally:
            await backend.aclose()

    out = asyncio.run(go())
    assert [cid for cid, _, _ in out] == [c.criterion_id for c in criteria]
    for cid, passed, reason in out:
        assert passed is None or isinstance(passed, bool), (cid, passed)
        assert isinstance(reason, str)
        if passed is None:
            assert reason.startswith("ungraded"), reason
