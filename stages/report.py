"""Stage `report`: the run's results as one HTML page, the same in Markdown, and PNG plots.

    python -m pipeline --recipe <recipe> report      (or ``stages.report.run(cfg)``)

Reads only the warehouse (tables evaluations, policies, train_logs,
nightly_rounds, stage_runs, grades; views trajectory_scores and
rejection_funnel) and writes ``<run.dir>/report/``: ``report.html``
(self-contained: plots embedded as data URIs), ``report.md`` and the plots
as ``*.png``. Opens with the headline — base vs SFT held-out headline score with
95% bootstrap intervals and the paired lift — then plots (score vs
coverage, base vs SFT per held-out room, rejection funnel, training loss,
delegation vs room size) and tables (per-policy evaluation, the behaviour
table of the reference report, sampled trajectories, judge agreement,
nightly rounds, run metadata). Anything not produced yet is a note, not an
error, so the report can be built after any stage. Always rebuilt whole:
it is cheap and must reflect the warehouse as it is now.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import duckdb

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.grading.agreement import agreement_report
from pipeline.report import plots
from pipeline.report.known_answers import known_answers_section
from pipeline.report.render import Image, Section, Table, to_html, to_markdown
from pipeline.stats import pearson

TITLE = "RLM root self-distillation report"
# The published reference this pipeline mirrors (GLM-5.2 root, 20 held-out rooms).
REFERENCE = (
    "Reference report: base 46.1% → SFT 60.1% on 20 held-out rooms; calls/size correlation 0.17 → 0.84."
)

# Behaviour metrics of the reference report's Table 1, as evaluate writes them: (metric, label, format).
BEHAVIOUR = [
    ("subcalls", "subagent calls per trajectory", "num1"),
    ("delegated_chars", "characters delegated to subagents", "int"),
    ("memo_chars", "memo length (characters)", "int"),
    ("findings_carried", "share of subagent findings carried into the memo", "pct"),
    ("memo_before_delegation_done", "share of memos begun before the last subagent call returned", "pct"),
    ("calls_size_corr", "correlation of subagent calls with room size", "num2"),
    ("recall", "recall: share of non-trap criteria passed", "pct"),
    ("precision", "precision: claims the room supports, above chance", "pct"),
    ("trap_failures", "trap criteria failed per trajectory", "num2"),
]


# --------------------------------------------------------------------------- formatting


def pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}%"


def pct_ci(v: float | None, lo: float | None, hi: float | None) -> str:
    if v is None:
        return "–"
    if lo is None or hi is None:
        return pct(v)
    return f"{100 * v:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def pts_ci(v: float | None, lo: float | None, hi: float | None) -> str:
    """A difference of two rates in percentage points."""
    if v is None:
        return "–"
    s = f"{100 * v:+.1f} pts"
    return s if lo is None or hi is None else f"{s} [{100 * lo:+.1f}, {100 * hi:+.1f}]"


def fmt(v: Any, kind: str) -> str:
    if v is None:
        return "–"
    if kind == "pct":
        return pct(v)
    if kind == "int":
        return f"{round(float(v)):,}"
    if kind == "num1":
        return f"{float(v):.1f}"
    return f"{float(v):.2f}"


# --------------------------------------------------------------------------- warehouse reads


def _has(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    row = con.execute(
        "select count(*) from information_schema.tables where table_name = ?", [name]
    ).fetchone()
    return bool(row and row[0])


def _rows(con: duckdb.DuckDBPyConnection, name: str, sql: str, params: list | None = None) -> list[dict]:
    """Rows of a query on table/view ``name``; empty when it does not exist (older warehouse)."""
    return db.fetch_dicts(con, sql, params) if _has(con, name) else []


def policy_labels(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Short readable names: 'base' for adapter-free policies, 'SFT' for trained ones (with the id when ambiguous)."""
    rows = _rows(
        con,
        "policies",
        "select policy_id, adapter, harness, prompt from policies order by created_at, policy_id",
    )
    bases = [r for r in rows if r["adapter"] is None]
    sfts = [r for r in rows if r["adapter"] is not None]
    labels = {}
    for r in bases:
        labels[r["policy_id"]] = (
            "base" if len(bases) == 1 else f"base {r['harness']}/{r['prompt']} ({r['policy_id'][:8]})"
        )
    for i, r in enumerate(sfts, start=1):
        labels[r["policy_id"]] = "SFT" if len(sfts) == 1 else f"SFT {i} ({r['policy_id'][:8]})"
    return labels


def latest_evaluation(con: duckdb.DuckDBPyConnection) -> tuple[str | None, list[dict], int]:
    """(eval_id, its rows, number of evaluations in the warehouse) for the newest evaluation."""
    evals = _rows(
        con,
        "evaluations",
        "select eval_id from evaluations group by eval_id order by max(created_at) desc, eval_id desc",
    )
    if not evals:
        return None, [], 0
    eval_id = evals[0]["eval_id"]
    rows = db.fetch_dicts(
        con, "select * from evaluations where eval_id = ? order by policy_id, metric", [eval_id]
    )
    return eval_id, rows, len(evals)


def _by_policy(rows: list[dict]) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for r in rows:
        out.setdefault(r["policy_id"], {})[r["metric"]] = r
    return out


def _ordered_policies(by: dict[str, dict[str, dict]], base_id: str | None) -> list[str]:
    return sorted(by, key=lambda p: (p != base_id, p))


# --------------------------------------------------------------------------- sections


def headline(labels: dict[str, str], eval_rows: list[dict]) -> str:
    if not eval_rows:
        return "No evaluation yet: run the evaluate stage to compare base and SFT on held-out rooms."
    by = _by_policy(eval_rows)
    base_id = eval_rows[0]["base_policy_id"]
    parts = []
    base = by.get(base_id, {}).get("score")
    n_rooms = base["n_rooms"] if base else None
    if base:
        parts.append(
            f"{labels.get(base_id, base_id)} {pct_ci(base['value'], base['ci_low'], base['ci_high'])}"
        )
    for pid in _ordered_policies(by, base_id):
        if pid == base_id:
            continue
        m = by[pid]
        pr, lift = m.get("score"), m.get("lift")
        text = labels.get(pid, pid)
        if pr:
            text += f" {pct_ci(pr['value'], pr['ci_low'], pr['ci_high'])}"
            n_rooms = n_rooms or pr["n_rooms"]
        if lift:
            text += f", lift {pts_ci(lift['value'], lift['ci_low'], lift['ci_high'])}"
        parts.append(text)
    rooms = f" on {n_rooms} held-out rooms" if n_rooms else ""
    return (
        f"Held-out headline score{rooms} (F1 of rubric recall and claim precision; 95% bootstrap CI over rooms): "
        + "; ".join(parts)
        + "."
    )


def evaluation_section(
    labels: dict[str, str], eval_id: str | None, eval_rows: list[dict], n_evals: int
) -> Section:
    s = Section("Evaluation on held-out rooms")
    if not eval_rows:
        s.blocks.append("No evaluation yet.")
        return s
    by = _by_policy(eval_rows)
    base_id = eval_rows[0]["base_policy_id"]
    kinds = sorted(
        {m.split(":", 1)[1] for m in (r["metric"] for r in eval_rows) if m.startswith("pass_rate:")}
    )
    headers = [
        "policy",
        "policy id",
        "rooms",
        "score [95% CI]",
        "lift vs base [95% CI]",
        "finished",
        "coverage",
    ]
    headers += [f"pass rate: {k}" for k in kinds]
    rows = []
    for pid in _ordered_policies(by, base_id):
        m = by[pid]

        def ci(metric: str, m=m) -> str:
            r = m.get(metric)
            return pct_ci(r["value"], r["ci_low"], r["ci_high"]) if r else "–"

        n_rooms = next((m[k]["n_rooms"] for k in ("score", "lift") if k in m and m[k]["n_rooms"]), None)
        lift = m.get("lift")
        rows.append(
            [
                labels.get(pid, pid),
                pid,
                "–" if n_rooms is None else str(n_rooms),
                ci("score"),
                "(base)"
                if pid == base_id
                else (pts_ci(lift["value"], lift["ci_low"], lift["ci_high"]) if lift else "–"),
                ci("finished_rate"),
                ci("coverage"),
            ]
            + [pct(m[f"pass_rate:{k}"]["value"]) if f"pass_rate:{k}" in m else "–" for k in kinds]
        )
    caption = (
        f"Evaluation {eval_id}"
        + (f" (newest of {n_evals})" if n_evals > 1 else "")
        + ". Intervals: percentile bootstrap over rooms; lift is the paired per-room difference to the base."
    )
    s.blocks.append(Table(headers, rows, caption))

    behaviour = Table(
        ["behaviour (held-out)"] + [labels.get(p, p) for p in _ordered_policies(by, base_id)],
        [],
        "The behaviour table of the reference report (its Table 1), averaged over the held-out trajectories.",
    )
    for metric, label, kind in BEHAVIOUR:
        values = [by[p].get(metric, {}).get("value") for p in _ordered_policies(by, base_id)]
        if any(v is not None for v in values):
            behaviour.rows.append([label] + [fmt(v, kind) for v in values])
    if behaviour.rows:
        s.blocks.append(behaviour)
    return s


def trajectories_section(labels: dict[str, str], scores: list[dict]) -> Section:
    s = Section("Sampled trajectories")
    if not scores:
        s.blocks.append("No trajectories yet.")
        return s
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in scores:
        groups.setdefault((r["policy_id"], r["purpose"]), []).append(r)

    def mean(rows: list[dict], key: str) -> float | None:
        vals = [float(r[key]) for r in rows if r.get(key) is not None]
        return sum(vals) / len(vals) if vals else None

    table = Table(
        [
            "policy",
            "purpose",
            "trajectories",
            "rooms",
            "finished",
            "score",
            "coverage",
            "subagent calls",
            "chars delegated",
            "memo chars",
            "findings carried",
            "memo before last return",
            "r(calls, docs)",
            "r(calls, tokens)",
        ],
        [],
        "All trajectories in the warehouse by policy and purpose (train = sampled for distillation, eval = held-out).",
    )
    for (pid, purpose), rows in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        calls = [r["n_subcalls"] for r in rows]
        r_docs = pearson(calls, [r.get("room_n_documents") for r in rows])
        r_toks = pearson(calls, [r.get("room_n_tokens") for r in rows])
        table.rows.append(
            [
                labels.get(pid, pid),
                purpose,
                str(len(rows)),
                str(len({r["room_id"] for r in rows})),
                pct(mean([{"f": float(bool(r["finished"]))} for r in rows], "f")),
                pct(mean(rows, "score")),
                pct(mean(rows, "coverage")),
                fmt(mean(rows, "n_subcalls"), "num1"),
                fmt(mean(rows, "delegated_chars"), "int"),
                fmt(mean(rows, "memo_chars"), "int"),
                pct(mean(rows, "findings_carried")),
                pct(mean([{"m": float(bool(r["memo_before_last_return"]))} for r in rows], "m")),
                fmt(r_docs, "num2"),
                fmt(r_toks, "num2"),
            ]
        )
    s.blocks.append(table)
    return s


def funnel_section(con: duckdb.DuckDBPyConnection, out: Path) -> tuple[Section, Path | None]:
    s = Section("Rejection filter")
    sel = _rows(
        con,
        "selections",
        "select selection_id, any_value(params) as params from selections "
        "group by selection_id order by max(created_at) desc, selection_id desc limit 1",
    )
    if not sel or not _has(con, "rejection_funnel"):
        s.blocks.append("No selection yet: run the filter stage.")
        return s, None
    sid = sel[0]["selection_id"]
    rows = db.fetch_dicts(
        con,
        "select * from rejection_funnel where selection_id = ? order by room_id = '' desc, room_id",
        [sid],
    )
    total = next((r for r in rows if r["room_id"] == ""), None)
    png = plots.funnel(total or {}, out / "rejection_funnel.png")
    if png:
        s.blocks.append(
            Image(png, f"Rejection funnel of selection {sid}: trajectories left after each rule.")
        )
    headers = ["room"] + [name for _, name in plots.FUNNEL_STEPS] + ["acceptance"]
    table = Table(headers, [], f"Selection {sid}; params {sel[0]['params']}")
    for r in rows:
        vals = [int(r[k] or 0) for k, _ in plots.FUNNEL_STEPS]
        table.rows.append(
            [r["room_id"] or "all rooms"]
            + [str(v) for v in vals]
            + [pct(vals[-1] / vals[0] if vals[0] else None)]
        )
    s.blocks.append(table)
    return s, png


def training_section(con: duckdb.DuckDBPyConnection, out: Path) -> tuple[Section, Path | None]:
    s = Section("Training")
    runs = _rows(con, "train_runs", "select * from train_runs order by started_at, train_id")
    logs = _rows(con, "train_logs", "select * from train_logs order by train_id, step")
    by: dict[str, list[dict]] = {}
    for r in logs:
        by.setdefault(r["train_id"], []).append(r)
    png = plots.training_loss(by, out / "training_loss.png")
    if png:
        s.blocks.append(
            Image(png, "Training loss (solid) and validation loss (dashed, markers) per optimizer step.")
        )
    if runs:
        s.blocks.append(
            Table(
                [
                    "train run",
                    "dataset",
                    "parent policy",
                    "new policy",
                    "status",
                    "tokens",
                    "seconds",
                    "final loss",
                    "final eval loss",
                ],
                [
                    [
                        r["train_id"],
                        r["dataset_id"],
                        r["parent_policy_id"],
                        r["policy_id"] or "–",
                        r["status"],
                        fmt(r["train_tokens"], "int"),
                        fmt(r["train_seconds"], "num1"),
                        fmt(r["final_train_loss"], "num2") if r["final_train_loss"] is not None else "–",
                        fmt(r["final_eval_loss"], "num2") if r["final_eval_loss"] is not None else "–",
                    ]
                    for r in runs
                ],
            )
        )
    if not png and not runs:
        s.blocks.append("No training run yet.")
    return s, png


def agreement_section(con: duckdb.DuckDBPyConnection) -> Section | None:
    rows = agreement_report(con)
    if not rows:
        return None
    return Section(
        "Judge agreement",
        [
            Table(
                [
                    "llm judge",
                    "criterion kind",
                    "pairs",
                    "ungraded",
                    "agreement",
                    "reference pass",
                    "llm pass",
                    "Cohen's kappa",
                ],
                [
                    [
                        r["llm_judge"],
                        r["kind"],
                        str(r["n"]),
                        str(r["n_ungraded"]),
                        pct(r["agreement"]),
                        pct(r["reference_pass_rate"]),
                        pct(r["llm_pass_rate"]),
                        fmt(r["kappa"], "num2"),
                    ]
                    for r in rows
                ],
                "Reference judge vs LLM judge on the (trajectory, criterion) pairs both graded; ungraded verdicts excluded.",
            )
        ],
    )


def nightly_section(con: duckdb.DuckDBPyConnection, labels: dict[str, str]) -> Section | None:
    rows = _rows(con, "nightly_rounds", "select * from nightly_rounds order by started_at, round_id")
    if not rows:
        return None
    return Section(
        "Nightly rounds",
        [
            Table(
                ["round", "started", "champion before", "candidate", "lift [95% CI]", "decision"],
                [
                    [
                        r["round_id"],
                        f"{r['started_at']:%Y-%m-%d %H:%M}",
                        labels.get(r["champion_before"], r["champion_before"]),
                        labels.get(r["candidate_policy_id"], r["candidate_policy_id"] or "–"),
                        pts_ci(r["lift"], r["lift_ci_low"], r["lift_ci_high"]),
                        r["decision"],
                    ]
                    for r in rows
                ],
            )
        ],
    )


def sandbox_levels(con: duckdb.DuckDBPyConnection) -> str:
    """'bwrap+seccomp: 30, python: 2': the kernel layer each trajectory's REPL ran under."""
    rows = con.execute(
        "select coalesce(sandbox_level, 'not recorded'), count(*) from trajectories "
        "where harness = 'rlm' group by 1 order by 2 desc, 1"
    ).fetchall()
    return ", ".join(f"{level}: {n}" for level, n in rows) or "no trajectories"


def metadata_section(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig) -> Section:
    s = Section("Run metadata")
    db_rel = os.path.relpath(Path(cfg.run.db_path).resolve(), Path(cfg.run.dir).resolve())
    s.blocks.append(
        Table(
            ["field", "value"],
            [
                ["config hash", cfg.hash()],
                ["database (relative to run dir)", db_rel],
                ["schema version", str(db.schema_version(con))],
                ["REPL sandbox levels (trajectories)", sandbox_levels(con)],
                ["report built", f"{db.now():%Y-%m-%d %H:%M:%S} UTC"],
            ],
        )
    )
    runs = _rows(con, "stage_runs", "select * from stage_runs order by started_at, run_id")
    table = Table(["stage", "run id", "status", "started", "seconds", "config hash", "counts"], [])
    for r in runs:
        secs = (r["ended_at"] - r["started_at"]).total_seconds() if r["ended_at"] else None
        counts = r["counts"]
        if isinstance(counts, str):
            try:
                counts = json.loads(counts)
            except json.JSONDecodeError:
                pass
        if isinstance(counts, dict):
            counts = ", ".join(f"{k}={v}" for k, v in counts.items() if k not in ("run_id", "headline"))
        text = str(counts or "")
        if r["error"]:
            text = f"{text} ERROR: {r['error']}".strip()
        table.rows.append(
            [r["stage"], r["run_id"], r["status"], f"{r['started_at']:%Y-%m-%d %H:%M:%S}",
             fmt(secs, "num1"), r["config_hash"], text[:300]]
        )  # fmt: skip
    s.blocks.append(table if table.rows else "No stage runs recorded.")
    return s


# --------------------------------------------------------------------------- stage


def build(
    con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, out: Path
) -> tuple[str, list[Section], list[Path]]:
    """Headline, sections and the PNGs written under ``out``."""
    labels = policy_labels(con)
    eval_id, eval_rows, n_evals = latest_evaluation(con)
    scores = _rows(
        con, "trajectory_scores", "select * from trajectory_scores order by policy_id, room_id, trajectory_id"
    )
    for r in scores:
        labels.setdefault(r["policy_id"], r["policy_id"])
    pngs: list[Path] = []

    def keep(p: Path | None) -> Path | None:
        if p:
            pngs.append(p)
        return p

    top = headline(labels, eval_rows)
    head = Section("Headline", [top, REFERENCE])
    sections = [head]

    figs = Section("Scores and coverage")
    p = keep(plots.score_vs_coverage(scores, labels, out / "score_vs_coverage.png"))
    if p:
        figs.blocks.append(
            Image(p, "Headline score vs probe coverage, one point per graded trajectory (all purposes).")
        )
    if eval_rows:
        base_id = eval_rows[0]["base_policy_id"]
        cands = [pid for pid in _ordered_policies(_by_policy(eval_rows), base_id) if pid != base_id]
        per_room: dict[str, dict[str, float]] = {}
        for r in db.fetch_dicts(
            con,
            "select policy_id, room_id, avg(score) as score from trajectory_scores "
            "where purpose = 'eval' and score is not null group by policy_id, room_id",
        ):
            per_room.setdefault(r["policy_id"], {})[r["room_id"]] = float(r["score"])
        if cands:
            cand = cands[-1]
            rooms = sorted(set(per_room.get(base_id, {})) | set(per_room.get(cand, {})))
            p = keep(
                plots.heldout_rooms(
                    rooms,
                    per_room.get(base_id, {}),
                    per_room.get(cand, {}),
                    (labels.get(base_id, base_id), labels.get(cand, cand)),
                    out / "heldout_rooms.png",
                )
            )
            if p:
                figs.blocks.append(
                    Image(p, "Mean headline score per held-out room, base vs SFT (sorted by the base).")
                )
    eval_scores = [r for r in scores if r["purpose"] == "eval"] or scores
    p = keep(plots.delegation_vs_size(eval_scores, labels, out / "delegation_vs_size.png"))
    if p:
        which = "held-out" if any(r["purpose"] == "eval" for r in scores) else "all"
        figs.blocks.append(
            Image(p, f"Subagent calls vs room size per trajectory ({which} trajectories); r = Pearson.")
        )
    if not figs.blocks:
        figs.blocks.append("No graded trajectories yet.")
    sections.append(figs)

    sections.append(evaluation_section(labels, eval_id, eval_rows, n_evals))
    sections.append(known_answers_section(con, labels, eval_rows))
    sections.append(trajectories_section(labels, scores))
    funnel, p = funnel_section(con, out)
    keep(p)
    sections.append(funnel)
    training, p = training_section(con, out)
    keep(p)
    sections.append(training)
    for extra in (agreement_section(con), nightly_section(con, labels)):
        if extra:
            sections.append(extra)
    sections.append(metadata_section(con, cfg))
    return top, sections, pngs


def run(cfg: PipelineConfig) -> dict:
    con = db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)
    out = Path(cfg.run.dir) / "report"
    out.mkdir(parents=True, exist_ok=True)
    with db.stage_run(con, "report", cfg.hash()) as counts:
        top, sections, pngs = build(con, cfg, out)
        # A plot with no data this time must not survive from an earlier build.
        for old in out.glob("*.png"):
            if old not in pngs:
                old.unlink()
        (out / "report.md").write_text(to_markdown(TITLE, sections))
        (out / "report.html").write_text(to_html(TITLE, sections, headline=top))
        counts.update(report=str(out / "report.html"), plots=len(pngs), sections=len(sections), headline=top)
        print(top)
        print(f"report: {out / 'report.html'}")
    con.close()
    return counts
