"""`python -m pipeline judge-check`: is the recipe's LLM judge (models.judge) an instrument?

    python -m pipeline --recipe R judge-check [--room NAME ...] [--memo NAME ...] [--corpus DIR] [--sampled N]

Reads the warehouse and grades, with both the reference judge and
the LLM judge, on every room (or the ``--room`` ones): the known-answer memos
(pipeline.grading.known_answers.known_memos, or the ``--memo`` ones) and up to ``--sampled`` memos the
warehouse's trajectories hold for the room. The LLM judge sees each memo as
the reference judge reads it (reading budget, copied text cut out) and
answers through structured outputs (pipeline.grading.llm_judge); recall
comes from its verdicts, precision from the reference judge's claim check, as
in the grade stage. No grades and no judge cache are written; the agreement
table is, to ``judge_checks`` (one transaction, once the check is done), for
the report's judge section. With
``serve.manage`` the recipe's local vLLM servers run for the command.

It prints, on stdout:

1. **Known answers**, one line per room and known-answer memo: ``room``,
   ``source``, ``memo``, ``bar`` (the headline range known_answers.BARS
   holds the reference judge to), ``reference`` and ``llm`` (the headline
   each judge gives; the LLM judge's precision is the reference judge's claim
   check, so only recall tells the judges apart), ``ref_recall`` and
   ``llm_recall``, ``graded`` and ``ungraded`` (criteria
   the LLM judge gave a valid verdict, and those it left ungraded: invalid
   reply, or a pass whose quote is not in the memo as graded), ``ref_ok`` and
   ``llm_ok`` (headline within the bar).
2. **Agreement**, Cohen's kappa of criterion verdicts: ``judge``,
   ``against``, ``memos``, ``kind`` (criterion kind, or ``all``), ``n``
   (pairs both sides graded), ``ungraded``, ``agreement``, ``truth_pass`` and
   ``judge_pass`` (pass rates), ``kappa`` (empty when undefined):
   - the LLM judge against the reference judge on the generated rooms, per
     criterion kind over every memo, plus ``all`` over the known-answer memos
     and over the sampled memos alone;
   - on CUAD rooms when ``--corpus`` holds cuad/: the LLM judge *and* the
     reference judge against the CUAD expert labels, where the labels fix the
     right verdict: on the memo written from the label table every criterion
     passes, on the empty memo every identify criterion fails and every trap
     passes.

and on stderr: criteria judged, seconds, criteria/s, the share of criteria
with a valid verdict and the commonest reasons for the rest.

The exit status is 0 whatever the judge's quality (the tables say it); 1
only on errors: no warehouse, no rooms, a judge that is not configured or
cannot be reached.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.errors import UserError
from pipeline.grading.agreement import agreement_rows
from pipeline.grading.grade_run import llm_judge_name
from pipeline.grading.known_answers import BARS, known_memos
from pipeline.grading.llm_judge import judge_memo
from pipeline.grading.reference import ReferenceGrader
from pipeline.llm.base import make_backend
from pipeline.rooms import store
from pipeline.rooms.model import Criterion, Room

DEFAULT_SAMPLED = 8  # sampled memos per room


@dataclass
class Judged:
    room: Room
    memo_set: str  # "known-answer" | "sampled"
    name: str  # the known-answer memo's name, or the trajectory id
    reference: list[tuple[str, bool, str]]
    llm: list[tuple[str, bool | None, str]]
    reference_headline: float
    reference_recall: float
    llm_headline: float
    llm_recall: float


def _sampled(con: duckdb.DuckDBPyConnection, room: str, limit: int) -> list[tuple[str, str]]:
    if limit <= 0:
        return []
    return con.execute(
        "select trajectory_id, memo from trajectories where room_id = ? and memo is not null and memo <> '' "
        "order by trajectory_id limit ?",
        [room, limit],
    ).fetchall()


def _expert_truth(memo: str, c: Criterion) -> bool | None:
    """The verdict CUAD's labels fix for ``c`` on a known-answer memo (None: not fixed)."""
    if memo == "expert_labels":
        return True  # written from the label table: every labelled clause named and cited, no decoy
    if memo == "empty":
        return c.is_trap  # says nothing: finds nothing, flags no decoy
    return None


async def _judge_rooms(
    cfg: PipelineConfig,
    con: duckdb.DuckDBPyConnection,
    names: list[str],
    corpus: str | None,
    sampled: int,
    only: list[str] | None = None,
) -> tuple[list[Judged], float]:
    """Every memo of every room through both judges; (results, seconds spent waiting on the LLM judge)."""
    judge_cfg = cfg.models.judge
    name = llm_judge_name(cfg)
    try:
        backend = make_backend(judge_cfg)
    except ValueError as exc:
        raise UserError(f"judge-check: the LLM judge (models.judge) is not usable: {exc}") from exc
    gate = asyncio.Semaphore(max(1, judge_cfg.concurrency))
    out: list[Judged] = []
    llm_s = 0.0
    try:
        for room_name in names:
            room = store.load_room(con, room_name, with_text=True)
            grader = ReferenceGrader(room, budget_words=cfg.grade.budget_words or None)
            memos = [
                ("known-answer", k, m) for k, m in known_memos(room, corpus).items() if not only or k in only
            ]
            memos += [("sampled", tid, m) for tid, m in _sampled(con, room.name, sampled)]
            # reading needs the room's text: done here, before the concurrent requests
            graded = [grader.readable(m) for _, _, m in memos]

            async def one(text: str, criteria: list[Criterion]) -> list[tuple[str, bool | None, str]]:
                async with gate:
                    return await judge_memo(
                        backend,
                        text,
                        criteria,
                        judge_name=name,
                        criteria_per_call=cfg.grade.criteria_per_call,
                        max_attempts=cfg.grade.max_attempts,
                    )

            start = time.monotonic()
            verdicts = await asyncio.gather(*(one(t, room.criteria) for t in graded))
            llm_s += time.monotonic() - start
            for (memo_set, memo_name, memo), llm in zip(memos, verdicts, strict=True):
                ref = grader.grade(memo)
                by_llm = grader.grade_with(memo, llm)
                out.append(
                    Judged(
                        room,
                        memo_set,
                        memo_name,
                        ref.verdicts,
                        llm,
                        ref.headline,
                        ref.recall,
                        by_llm.headline,
                        by_llm.recall,
                    )
                )
            print(f"judge-check: {room.name}: {len(memos)} memos judged", file=sys.stderr, flush=True)
    finally:
        await backend.aclose()
    return out, llm_s


def known_rows(results: list[Judged]) -> list[dict]:
    """The known-answer table: one row per room and known-answer memo."""
    rows = []
    for r in results:
        if r.memo_set != "known-answer":
            continue
        bar = BARS.get(r.name)
        rows.append(
            {
                "room": r.room.name,
                "source": r.room.source,
                "memo": r.name,
                "bar": f"[{bar[0]:.2f}, {bar[1]:.2f}]" if bar else None,
                "reference": round(r.reference_headline, 3),
                "llm": round(r.llm_headline, 3),
                "ref_recall": round(r.reference_recall, 3),
                "llm_recall": round(r.llm_recall, 3),
                "graded": sum(p is not None for _, p, _ in r.llm),
                "ungraded": sum(p is None for _, p, _ in r.llm),
                "ref_ok": bar[0] <= r.reference_headline <= bar[1] if bar else None,
                "llm_ok": bar[0] <= r.llm_headline <= bar[1] if bar else None,
            }
        )
    return rows


def _labelled(rows: list[dict], judge: str, against: str, memos: str) -> list[dict]:
    return [
        {
            "judge": judge,
            "against": against,
            "memos": memos,
            "kind": r["kind"],
            "n": r["n"],
            "ungraded": r["n_ungraded"],
            "agreement": r["agreement"],
            "truth_pass": r["reference_pass_rate"],
            "judge_pass": r["llm_pass_rate"],
            "kappa": r["kappa"],
        }
        for r in rows
    ]


def agreement_table(results: list[Judged], llm_name: str) -> list[dict]:
    """The agreement table (see the module docstring)."""
    pairs: dict[str, list[tuple[str, bool | None, bool | None]]] = {"known-answer": [], "sampled": []}
    experts_llm: list[tuple[str, bool | None, bool | None]] = []
    experts_ref: list[tuple[str, bool | None, bool | None]] = []
    for r in results:
        kinds = {c.criterion_id: c for c in r.room.criteria}
        llm = {cid: p for cid, p, _ in r.llm}
        if r.room.source == "generated":
            pairs[r.memo_set] += [(kinds[cid].kind, p, llm[cid]) for cid, p, _ in r.reference]
        if r.room.source == "cuad" and r.memo_set == "known-answer":
            for cid, p, _ in r.reference:
                truth = _expert_truth(r.name, kinds[cid])
                if truth is not None:
                    experts_llm.append((kinds[cid].kind, truth, llm[cid]))
                    experts_ref.append((kinds[cid].kind, truth, p))
    rows = _labelled(agreement_rows(pairs["known-answer"] + pairs["sampled"]), llm_name, "reference", "all")
    for memo_set in ("known-answer", "sampled"):
        if pairs[memo_set]:
            rows += _labelled(agreement_rows(pairs[memo_set])[-1:], llm_name, "reference", memo_set)
    for judge, ex in ((llm_name, experts_llm), ("reference", experts_ref)):
        rows += _labelled(agreement_rows(ex), judge, "cuad-experts", "expert_labels+empty")
    for row in rows:
        for key in ("agreement", "truth_pass", "judge_pass", "kappa"):
            if row[key] is not None:
                row[key] = round(row[key], 3)
    return rows


def check(
    cfg: PipelineConfig,
    corpus: str | None = None,
    names: list[str] | None = None,
    sampled: int = DEFAULT_SAMPLED,
    only: list[str] | None = None,
) -> dict:
    """Both tables and the judge's speed: {"known": rows, "agreement": rows, "criteria", "seconds", ...}."""
    db_path = Path(cfg.run.db_path)
    if not db_path.exists():
        raise UserError(f"no warehouse at {db_path} (run `rooms generate` or `rooms cuad` first)")
    if corpus is not None and not (Path(corpus) / "cuad").is_dir():
        raise UserError(f"--corpus {corpus}: no cuad/ folder in it")
    con = db.connect(db_path, read_only=True, lock_timeout_s=cfg.run.lock_timeout_s)
    try:
        names = names or store.room_names(con)
        if not names:
            raise UserError(f"{db_path}: no rooms to check")
        if cfg.serve.manage:
            from pipeline.serving import running_servers

            servers: contextlib.AbstractContextManager = running_servers(cfg)
        else:
            servers = contextlib.nullcontext()
        with servers:
            results, seconds = asyncio.run(_judge_rooms(cfg, con, names, corpus, sampled, only))
    finally:
        con.close()
    verdicts = [v for r in results for v in r.llm]
    reasons = Counter(_reason_kind(reason) for _, p, reason in verdicts if p is None)
    return {
        "known": known_rows(results),
        "agreement": agreement_table(results, llm_judge_name(cfg)),
        "criteria": len(verdicts),
        "valid": sum(p is not None for _, p, _ in verdicts),
        "seconds": seconds,
        "ungraded_reasons": reasons.most_common(5),
    }


def _reason_kind(reason: str) -> str:
    """An ungraded reason without its specifics (attempts, verdict numbers, quotes, reply text), for counting."""
    text = re.sub(r"^ungraded( after \d+ attempts)?: (verdict \d+: )?", "", reason)
    text = re.sub(r"'(?:[^'\\]|\\.)*'", "'...'", text)  # the quote or reply it cites
    text = re.sub(r"\bid \d+", "id N", text)
    return text.split(" (", 1)[0].split(": ", 1)[0][:80]


def record(cfg: PipelineConfig, result: dict) -> str:
    """Write the agreement rows to the warehouse table ``judge_checks`` in one transaction; the check id.

    The report's judge section shows the newest check (sql/queries/judge_check_latest.sql).
    """
    now = db.now()
    check_id = f"judge-check-{now:%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
    totals = {"criteria": result["criteria"], "valid": result["valid"], "seconds": result["seconds"]}
    rows = [
        {"check_id": check_id, "checked_at": now, **row, "n_ungraded": row["ungraded"], **totals}
        for row in result["agreement"]
    ]
    for row in rows:
        del row["ungraded"]
    con = db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)
    try:
        db.write_many(con, {"judge_checks": rows})
    finally:
        con.close()
    return check_id


def latest_check(con: duckdb.DuckDBPyConnection) -> list[dict]:
    """The newest judge-check's rows (``judge_checks``), as ``record`` wrote them; [] before any."""
    return db.fetch_dicts(con, db.read_sql("queries/judge_check_latest.sql"))


def _show(title: str, rows: list[dict]) -> None:
    print(title)
    if not rows:
        print("(none)\n")
        return
    out = duckdb.connect()
    out.register("t", pa.Table.from_pylist(rows))
    out.sql("select * from t").show(max_rows=10_000, max_width=250)


def print_judge_check(
    cfg: PipelineConfig,
    corpus: str | None = None,
    names: list[str] | None = None,
    sampled: int = DEFAULT_SAMPLED,
    only: list[str] | None = None,
) -> int:
    """`python -m pipeline judge-check`: print the tables (see the module docstring); 0 unless an error is raised."""
    try:
        result = check(cfg, corpus, names, sampled, only)
    except UserError:
        raise
    except RuntimeError as exc:  # the judge's backend failed for good (not a server that is down)
        raise UserError(f"judge-check: the LLM judge {llm_judge_name(cfg)} failed: {exc}") from exc
    _show(f"Known-answer memos: reference judge and LLM judge ({llm_judge_name(cfg)})", result["known"])
    _show("Agreement of criterion verdicts (Cohen's kappa)", result["agreement"])
    n, valid, seconds = result["criteria"], result["valid"], result["seconds"]
    rate = n / seconds if seconds > 0 else float("nan")
    share = valid / n if n else float("nan")
    print(
        f"{n} criteria judged in {seconds:.1f} s ({rate:.2f} criteria/s); {valid} ({share:.1%}) with a valid verdict",
        file=sys.stderr,
    )
    for reason, count in result["ungraded_reasons"]:
        print(f"  ungraded x{count}: {reason}", file=sys.stderr)
    print(f"recorded as {record(cfg, result)} (the report's judge section shows it)", file=sys.stderr)
    return 0
