"""LLM judge: grade a memo against rubric criteria through any chat backend.

The judge reads the memo and a numbered batch of criterion *texts* (never the
machine-checkable fields the reference judge uses, which would leak the
answer) and must reply with strict JSON::

    {"verdicts": [{"id": "1", "pass": true, "reason": "one line"}, ...]}

Parsing is strict: ``json.loads`` after stripping one optional ```json fence,
then every verdict is checked (known id, boolean ``pass``, string
``reason``). Criteria without a valid verdict are asked again, alone in a
smaller batch, up to ``max_attempts`` requests; after that they are recorded
*ungraded* (``passed=None`` with the reason) — never counted as pass or fail,
because a judge that cannot answer says nothing about the memo.

Verdicts are cached in the warehouse table ``judge_cache`` by
(sha256 of the memo, criterion id, judge name): regrading an unchanged memo
costs no request. Ungraded results are not cached, so a rerun tries again.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence

import duckdb

from pipeline import db
from pipeline.ids import digest
from pipeline.llm.base import Backend, ContextLimitError, GenerationParams
from pipeline.rooms.model import Criterion

Verdict = tuple[str, bool | None, str]  # (criterion_id, passed or None = ungraded, reason)

SYSTEM_PROMPT = (
    "You are a meticulous M&A due-diligence reviewer grading a diligence memo against rubric criteria. "
    "For each numbered criterion decide whether the memo satisfies it. Judge only what the memo says. "
    "A criterion passes only when the memo itself states the finding in its own words together with what the "
    "criterion asks for (a citation, an amount, a next step) about the same matter; pasted source text, bare "
    "lists of file names and generic risk phrases do not pass, and a statement that something was not found "
    "does not claim it. "
    "Reply with JSON only, no prose and no markdown, exactly in this shape: "
    '{"verdicts": [{"id": "<criterion number>", "pass": true or false, "reason": "<one line>"}]} '
    "with one verdict for every criterion."
)

_FENCE = re.compile(r"^```(?:json)?[ \t]*\n(.*)\n[ \t]*```$", re.DOTALL | re.IGNORECASE)


class JudgeResponseError(ValueError):
    """A judge reply that is not the JSON the prompt asked for."""


def memo_hash(memo: str) -> str:
    """The cache key of a memo: its full hex SHA-256."""
    return digest(memo, length=None)


def build_messages(memo: str, criteria: Sequence[Criterion]) -> list[dict[str, str]]:
    """Chat messages asking for verdicts on ``criteria`` (numbered 1..n in this batch)."""
    lines = [f"[{i}] {c.text.strip()}" for i, c in enumerate(criteria, start=1)]
    user = (
        "MEMO:\n<<<\n"
        + memo.strip()
        + "\n>>>\n\nCRITERIA:\n"
        + "\n".join(lines)
        + f'\n\nReturn {{"verdicts": [...]}} with exactly {len(criteria)} verdicts, ids "1" to "{len(criteria)}".'
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def parse_verdicts(text: str, ids: Sequence[str]) -> tuple[dict[str, tuple[bool, str]], dict[str, str]]:
    """Strictly parse a judge reply for the batch-local ``ids``.

    Returns (valid verdicts by id, problem by id for the ids without a valid
    verdict). A reply that is not the expected JSON object raises
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
        valid[cid] = (passed, " ".join(reason.split()))
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


async def _judge_batch(
    backend: Backend,
    memo: str,
    batch: list[Criterion],
    params: GenerationParams,
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
            completion = await backend.complete(build_messages(memo, pending), params)
        except ContextLimitError as exc:
            # Asking again cannot make the memo shorter.
            for c in pending:
                done[c.criterion_id] = (None, f"ungraded: memo does not fit the judge's context ({exc})")
            return done
        try:
            valid, problems = parse_verdicts(completion.text, ids)
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
) -> list[Verdict]:
    """Grade ``memo`` against ``criteria``; one (criterion_id, passed, reason) per criterion, in order.

    ``judge_name`` keys the cache and should be the grades.judge value
    (``llm:<model>``). ``passed`` is None for a criterion the judge could not
    grade. ``max_tokens`` defaults to room for a one-line reason per criterion.
    """
    if criteria_per_call < 1:
        raise ValueError(f"grade.criteria_per_call must be >= 1, got {criteria_per_call}")
    if max_attempts < 1:
        raise ValueError(f"grade.max_attempts must be >= 1, got {max_attempts}")
    ids = [c.criterion_id for c in criteria]
    if len(set(ids)) != len(ids):
        raise ValueError(f"judge_memo: duplicate criterion ids in {ids}")
    sha = memo_hash(memo)
    results: dict[str, tuple[bool | None, str]] = {}
    if cache is not None:
        results.update(cache.get_many(sha, ids, judge_name))
    todo = [c for c in criteria if c.criterion_id not in results]
    if todo:
        params = GenerationParams(
            max_tokens=max_tokens or 64 + 48 * min(criteria_per_call, len(todo)), temperature=0.0
        )
        batches = [todo[i : i + criteria_per_call] for i in range(0, len(todo), criteria_per_call)]
        fresh: dict[str, tuple[bool | None, str]] = {}
        for part in await asyncio.gather(
            *(_judge_batch(backend, memo, b, params, max_attempts) for b in batches)
        ):
            fresh.update(part)
        if cache is not None:
            cache.put_many(sha, judge_name, [(cid, p, r) for cid, (p, r) in fresh.items() if p is not None])
        results.update(fresh)
    return [(cid, results[cid][0], results[cid][1]) for cid in ids]
