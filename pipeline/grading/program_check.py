"""`program-check`: the known-answer test of the rooms, played by reference root programs.

The known-answer memos (pipeline.grading.known_answers) hold the judge to its
bars; this holds the rooms to theirs. A ladder of fixed root programs
(``ladder.yaml`` beside this file: nothing, a quarter, half, everything,
everything with joins, absence checks and totals, the best program the
project can write) runs through the real harness: each program is the root's
one turn (a ``FixedProgram`` backend), its code runs in the sandboxed REPL,
its ``llm_batch`` calls go to the recipe's subagent, and the reference judge
grades its memo. If the rooms measure the root, each rung scores clearly
above the one below:

- on generated rooms of seeds no recipe uses, each rung's mean headline is at
  least ``STEP`` above the rung below, and the top rung at least ``TOP_GAP``
  above ``everything``;
- on CUAD rooms (when the corpus is there), the order holds up to
  ``everything``: the cross-document issues the upper rungs join are planted
  in generated rooms only.

    rows = run_ladder(rooms, subagent)            # one LadderRow per (rung, room)
    table = ladder_table(rows)                    # mean [95% CI] per rung and room set
    failures = margin_failures(table)             # what breaks the bars; empty when all hold
    record_ladder(con, cfg, room_names)           # the ladder on a run's own rooms, into ladder_scores

The run's own rooms get the ladder too (``record_ladder``, a step of every
round): the mart ``trajectory_rungs`` places each sampled trajectory on its
room's ladder, and the report shows where the root's programs land.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import duckdb
import yaml

from pipeline import db
from pipeline.config import BackendConfig, HarnessConfig, PipelineConfig, SamplingConfig
from pipeline.grading.reference import GRADER_VERSION, ReferenceGrader
from pipeline.harness.episode import run_harness
from pipeline.harness.room_export import export_room
from pipeline.ids import digest
from pipeline.llm.base import Backend, Completion, GenerationParams, make_backend
from pipeline.rooms import store
from pipeline.rooms.model import Room, count_tokens
from pipeline.rooms.synthetic.generator import generate_room
from pipeline.stats import bootstrap_mean_ci

STEP = 0.05  # each rung above the one below, on generated rooms
TOP_GAP = 0.15  # the top rung above `everything`, on generated rooms
ORDERED_ON_CUAD = "everything"  # on CUAD rooms the order must hold up to this rung
# A room's rungs run side by side, each in its own REPL worker: 1.12x on 2 cores, where a rung is mostly
# CPU (docs/benchmarks.md, "The program-check ladder, rungs side by side").
LADDER_CONCURRENCY = 4
CHECK_SEED = 7_919_000  # generated rooms' seeds start here: far from every recipe's run.seed * 1000 + i


@dataclass(frozen=True)
class Rung:
    name: str
    skill: str  # what this rung does that the one below does not
    program: str


@dataclass(frozen=True)
class LadderRow:
    rung: str
    room: str
    room_set: str  # "generated" | "cuad"
    headline: float
    recall: float
    precision: float
    status: str
    subagent_tokens: int
    end_reason: str


def _ladder_text() -> str:
    return resources.files("pipeline.grading").joinpath("ladder.yaml").read_text()


def load_ladder() -> list[Rung]:
    rungs = yaml.safe_load(_ladder_text())["rungs"]
    return [Rung(r["name"], " ".join(r["skill"].split()), r["program"]) for r in rungs]


def ladder_hash() -> str:
    """Names this version of the ladder: rooms are scored again when a program changes."""
    return digest(_ladder_text(), 12)


class FixedProgram:
    """A root backend that writes one fixed program, whatever it is asked: a rung played as a policy."""

    def __init__(self, rung: Rung, context_tokens: int = 1 << 20) -> None:
        self.name = f"program:{rung.name}"
        self.context_tokens = context_tokens
        self._text = f"```python\n{rung.program.rstrip()}\n```"

    async def complete(self, messages: list[dict[str, str]], params: GenerationParams) -> Completion:
        return Completion(
            text=self._text,
            prompt_tokens=sum(count_tokens(m.get("content") or "") for m in messages),
            completion_tokens=count_tokens(self._text),
            model=self.name,
            finish_reason="stop",
        )

    async def aclose(self) -> None:
        return None


def generated_rooms(n_rooms: int, seed: int = CHECK_SEED, sizes: tuple[int, int] = (20, 300)) -> list[Room]:
    """``n_rooms`` generated rooms of seeds ``seed``, ``seed + 1``, ...; sizes spread evenly over ``sizes``."""
    lo, hi = sizes
    out = []
    for i in range(n_rooms):
        n_docs = lo if n_rooms == 1 else round(lo + (hi - lo) * i / (n_rooms - 1))
        out.append(generate_room(f"check-{seed + i}", seed + i, n_documents=n_docs, split="heldout"))
    return out


async def run_ladder(
    rooms: list[tuple[str, Room]],
    subagent: Backend,
    harness: HarnessConfig,
    rungs: list[Rung] | None = None,
    progress: bool = False,
    concurrency: int = LADDER_CONCURRENCY,
) -> list[LadderRow]:
    """Every rung on every (room set, room), a room's rungs ``concurrency`` at a time: the rows in (room,
    rung) order."""
    rungs = rungs or load_ladder()
    harness = dataclasses.replace(harness, max_turns=1)  # each program submits in its one cell
    gate = asyncio.Semaphore(concurrency)
    rows: list[LadderRow] = []
    # the ladder exports its own copy of each room: it never waits on, or writes into, a run folder
    with tempfile.TemporaryDirectory(prefix="rlm-ladder-") as tmp:
        for room_set, room in rooms:
            room_dir = export_room(room, Path(tmp) / room.name)
            grader = ReferenceGrader(room)

            async def one(rung: Rung, room_set: str = room_set, room: Room = room, room_dir: Path = room_dir,
                          grader: ReferenceGrader = grader) -> LadderRow:  # fmt: skip
                async with gate:
                    t0 = time.monotonic()
                    trace = await run_harness(
                        room,
                        room_dir,
                        FixedProgram(rung),
                        subagent,
                        harness,
                        SamplingConfig(temperature=0.0, top_p=1.0),
                        trajectory_id=f"ladder-{rung.name}-{room.name}",
                        policy_id=f"program-{rung.name}",
                        seed=0,
                    )
                g = grader.grade(trace.memo or "")
                row = LadderRow(
                    rung.name,
                    room.name,
                    room_set,
                    g.headline if trace.status == "submitted" else 0.0,
                    g.recall,
                    g.precision,
                    trace.status,
                    sum(s.prompt_tokens + s.completion_tokens for s in trace.subcalls),
                    trace.end_reason or "",
                )
                if progress:
                    print(
                        f"  {room.name:<14} {rung.name:<11} {row.headline:.3f} ({trace.status}, "
                        f"{time.monotonic() - t0:.1f} s)",
                        file=sys.stderr,
                    )
                return row

            rows += await asyncio.gather(*(one(rung) for rung in rungs))
    return rows


@dataclass(frozen=True)
class LadderCell:
    rung: str
    room_set: str
    mean: float
    lo: float
    hi: float
    n_rooms: int
    finished: float  # share of episodes that submitted


def ladder_table(rows: list[LadderRow], rungs: list[Rung] | None = None) -> list[LadderCell]:
    """Mean headline per (room set, rung), with a bootstrap interval over rooms, in ladder order."""
    order = [r.name for r in (rungs or load_ladder())]
    cells = []
    for room_set in dict.fromkeys(r.room_set for r in rows):
        for rung in order:
            xs = [r.headline for r in rows if r.room_set == room_set and r.rung == rung]
            if not xs:
                continue
            mean, lo, hi = bootstrap_mean_ci(xs, seed=0)
            done = sum(
                1 for r in rows if r.room_set == room_set and r.rung == rung and r.status == "submitted"
            )
            cells.append(LadderCell(rung, room_set, mean, lo, hi, len(xs), done / len(xs)))
    return cells


def margin_failures(cells: list[LadderCell], step: float = STEP, top_gap: float = TOP_GAP) -> list[str]:
    """The bars the table breaks, one line each (empty when every bar holds)."""
    failures = []
    for room_set in dict.fromkeys(c.room_set for c in cells):
        ladder = [c for c in cells if c.room_set == room_set]
        if room_set == "cuad":
            names = [c.rung for c in ladder]
            upto = names.index(ORDERED_ON_CUAD) + 1 if ORDERED_ON_CUAD in names else len(ladder)
            ladder, need = ladder[:upto], 0.0
        else:
            need = step
        for below, above in zip(ladder, ladder[1:], strict=False):
            if above.mean - below.mean < need or above.mean <= below.mean:
                failures.append(
                    f"{room_set}: {above.rung} {above.mean:.3f} is not {need:.2f} above {below.rung} {below.mean:.3f}"
                )
        if room_set != "cuad":
            top = ladder[-1]
            every = next((c for c in ladder if c.rung == "everything"), None)
            if every is not None and top.mean - every.mean < top_gap:
                failures.append(
                    f"{room_set}: top rung {top.rung} {top.mean:.3f} is not {top_gap:.2f} above "
                    f"everything {every.mean:.3f}"
                )
    return failures


def format_table(cells: list[LadderCell], rungs: list[Rung] | None = None) -> str:
    """The ladder as a Markdown table: one row per rung, a column per room set."""
    skills = {r.name: r.skill for r in (rungs or load_ladder())}
    sets = list(dict.fromkeys(c.room_set for c in cells))
    by = {(c.rung, c.room_set): c for c in cells}
    head = "| rung | what it adds | " + " | ".join(f"{s} rooms: mean [95% CI]" for s in sets) + " |"
    out = [head, "|" + "---|" * (2 + len(sets))]
    for rung in dict.fromkeys(c.rung for c in cells):
        vals = []
        for s in sets:
            c = by.get((rung, s))
            vals.append(f"{c.mean:.3f} [{c.lo:.3f}, {c.hi:.3f}] (n={c.n_rooms})" if c else "")
        out.append(f"| {rung} | {skills.get(rung, '')} | " + " | ".join(vals) + " |")
    return "\n".join(out)


def check(
    n_generated: int,
    seed: int,
    corpus: str | None,
    n_cuad: int,
    subagent_cfg: BackendConfig,
    harness: HarnessConfig,
    progress: bool = True,
) -> tuple[list[LadderRow], list[LadderCell], list[str]]:
    """Build the rooms, run the ladder, and judge the margins: (rows, table, failures)."""
    rooms: list[tuple[str, Room]] = [("generated", r) for r in generated_rooms(n_generated, seed)]
    if corpus and n_cuad > 0 and (Path(corpus) / "cuad").is_dir():
        from pipeline.rooms.cuad import build_cuad_rooms

        rooms += [
            ("cuad", r) for r in build_cuad_rooms(corpus, n_rooms=n_cuad, contracts_per_room=10, seed=seed)
        ]
    subagent = make_backend(subagent_cfg)
    rows = asyncio.run(run_ladder(rooms, subagent, harness, progress=progress))
    cells = ladder_table(rows)
    return rows, cells, margin_failures(cells)


def print_check(
    n_generated: int,
    seed: int,
    corpus: str | None,
    n_cuad: int,
    subagent_cfg: BackendConfig,
    harness: HarnessConfig,
) -> int:
    """`program-check`: print the ladder and its bars; 1 when a bar fails."""
    _, cells, failures = check(n_generated, seed, corpus, n_cuad, subagent_cfg, harness)
    print(format_table(cells))
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    print(
        f"ladder: {'every bar holds' if not failures else f'{len(failures)} bar(s) fail'} "
        f"(each rung >= {STEP:.2f} above the one below and the top >= {TOP_GAP:.2f} above everything on "
        f"generated rooms; order up to {ORDERED_ON_CUAD} on CUAD rooms)",
        file=sys.stderr,
    )
    return 1 if failures else 0


def record_ladder(
    con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, room_names: list[str]
) -> dict[str, int]:
    """Score the ladder on the named rooms that lack this ladder's rows (under this grader); each room's
    rows are written in one transaction. Returns counts: rooms scored and rooms already scored."""
    version, lhash = GRADER_VERSION, ladder_hash()
    # only the rooms still to score are loaded (with their texts): a round's rerun reads none
    names = [
        n
        for (n,) in con.execute(
            "select name from rooms where list_contains(?, name) and room_id not in "
            "(select room_id from ladder_scores where grader_version = ? and ladder_hash = ?) order by name",
            [room_names, version, lhash],
        ).fetchall()
    ]
    todo = [store.load_room(con, n, with_text=True) for n in names]
    rungs = load_ladder()
    index = {r.name: i for i, r in enumerate(rungs)}
    subagent = make_backend(cfg.models.subagent)
    for room in todo:
        rows = asyncio.run(run_ladder([("run", room)], subagent, cfg.harness, rungs))
        now = db.now()
        db.write_many(
            con,
            {
                "ladder_scores": [
                    {
                        "room_id": room.room_id,
                        "rung": r.rung,
                        "rung_index": index[r.rung],
                        "headline": r.headline,
                        "recall": r.recall,
                        "precision": r.precision,
                        "status": r.status,
                        "subagent_tokens": r.subagent_tokens,
                        "grader_version": version,
                        "ladder_hash": lhash,
                        "created_at": now,
                    }
                    for r in rows
                ]
            },
        )
    return {"rooms_scored": len(todo), "rooms_kept": len(room_names) - len(todo)}
