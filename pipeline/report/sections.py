"""The report's sections, each built from rows already read (pipeline.report.data).

A section never fails for lack of data: what is not produced yet becomes a
one-line note, so the report can be built after any stage. Sections that
draw a figure write its PNG under ``out`` and return its path (or None).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pipeline.config import PipelineConfig
from pipeline.metrics import BEHAVIOUR, base_first, by_policy, withheld_reason
from pipeline.report import plots
from pipeline.report.cost_section import usd
from pipeline.report.formatting import MISSING, fmt, pct, pct_ci, pts_ci
from pipeline.report.render import Image, Section, Table


def headline_text(labels: dict[str, str], eval_rows: list[dict]) -> str:
    """The report's opening sentence: each policy's held-out score [CI] and the candidates' lift [CI]."""
    if not eval_rows:
        return "No evaluation yet: run the evaluate stage to compare base and SFT on held-out rooms."
    by = by_policy(eval_rows)
    base_id = eval_rows[0]["base_policy_id"]
    parts = []
    base = by.get(base_id, {}).get("score")
    n_rooms = base["n_rooms"] if base else None
    if base:
        parts.append(
            f"{labels.get(base_id, base_id)} {pct_ci(base['value'], base['ci_low'], base['ci_high'])}"
        )
    for pid in base_first(by, base_id):
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
        if "lift_withheld" in m:
            text += ", lift withheld"
        parts.append(text)
    rooms = f" on {n_rooms} held-out rooms" if n_rooms else ""
    withheld = any("lift_withheld" in m for m in by.values())
    return (
        f"Held-out headline score{rooms} (F1 of rubric recall and claim precision; 95% bootstrap CI over rooms): "
        + "; ".join(parts)
        + "."
        + (f" The lift is withheld: {withheld_reason(eval_rows)}." if withheld else "")
    )


def figures_section(
    labels: dict[str, str],
    scores: list[dict],
    eval_rows: list[dict],
    eval_room_scores: dict[str, dict[str, float]],
    out: Path,
) -> tuple[Section, list[Path]]:
    """Score vs coverage, base vs the newest candidate per held-out room, delegation vs room size."""
    s = Section("Scores and coverage")
    pngs: list[Path] = []
    p = plots.score_vs_coverage(scores, labels, out / "score_vs_coverage.png")
    if p:
        pngs.append(p)
        s.blocks.append(
            Image(p, "Headline score vs probe coverage, one point per graded trajectory (all purposes).")
        )
    if eval_rows:
        base_id = eval_rows[0]["base_policy_id"]
        cands = [pid for pid in base_first(by_policy(eval_rows), base_id) if pid != base_id]
        if cands:
            base, cand = eval_room_scores.get(base_id, {}), eval_room_scores.get(cands[-1], {})
            p = plots.heldout_rooms(
                sorted(set(base) | set(cand)),
                base,
                cand,
                (labels.get(base_id, base_id), labels.get(cands[-1], cands[-1])),
                out / "heldout_rooms.png",
            )
            if p:
                pngs.append(p)
                s.blocks.append(
                    Image(p, "Mean headline score per held-out room, base vs SFT (sorted by the base).")
                )
    eval_scores = [r for r in scores if r["purpose"] == "eval"] or scores
    p = plots.delegation_vs_size(eval_scores, labels, out / "delegation_vs_size.png")
    if p:
        pngs.append(p)
        which = "held-out" if any(r["purpose"] == "eval" for r in scores) else "all"
        s.blocks.append(
            Image(p, f"Subagent calls vs room size per trajectory ({which} trajectories); r = Pearson.")
        )
    if not s.blocks:
        s.blocks.append("No graded trajectories yet.")
    return s, pngs


def evaluation_section(
    labels: dict[str, str], eval_id: str | None, eval_rows: list[dict], n_evals: int
) -> Section:
    """Per-policy evaluation table and the behaviour table, both from the newest evaluation's rows."""
    s = Section("Evaluation on held-out rooms")
    if not eval_rows:
        s.blocks.append("No evaluation yet.")
        return s
    by = by_policy(eval_rows)
    base_id = eval_rows[0]["base_policy_id"]
    policies = base_first(by, base_id)
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
        "no server reply",
    ]
    headers += [f"pass rate: {k}" for k in kinds]
    rows = []
    for pid in policies:
        m = by[pid]

        def ci(metric: str, m: dict[str, dict] = m) -> str:
            r = m.get(metric)
            return pct_ci(r["value"], r["ci_low"], r["ci_high"]) if r else MISSING

        n_rooms = next((m[k]["n_rooms"] for k in ("score", "lift") if k in m and m[k]["n_rooms"]), None)
        lift = m.get("lift")
        if pid == base_id:
            lift_text = "(base)"
        else:
            lift_text = pts_ci(lift["value"], lift["ci_low"], lift["ci_high"]) if lift else MISSING
            if "lift_withheld" in m:
                lift_text = "withheld (serving failures)"
        rows.append(
            [
                labels.get(pid, pid),
                pid,
                MISSING if n_rooms is None else str(n_rooms),
                ci("score"),
                lift_text,
                ci("finished_rate"),
                ci("coverage"),
                pct(m["serving_failed_rate"]["value"]) if "serving_failed_rate" in m else MISSING,
            ]
            + [pct(m[f"pass_rate:{k}"]["value"]) if f"pass_rate:{k}" in m else MISSING for k in kinds]
        )
    caption = (
        f"Evaluation {eval_id}"
        + (f" (newest of {n_evals})" if n_evals > 1 else "")
        + ". Intervals: percentile bootstrap over rooms; lift is the paired per-room difference to the base."
    )
    s.blocks.append(Table(headers, rows, caption))

    behaviour = Table(
        ["behaviour (held-out)"] + [labels.get(p, p) for p in policies],
        [],
        "The behaviour table of the reference report (its Table 1), averaged over the held-out trajectories.",
    )
    for metric in BEHAVIOUR:
        values = [by[p].get(metric.name, {}).get("value") for p in policies]
        if any(v is not None for v in values):
            behaviour.rows.append([metric.label] + [fmt(v, metric.kind) for v in values])
    if behaviour.rows:
        s.blocks.append(behaviour)
    return s


def trajectories_section(labels: dict[str, str], summaries: list[dict]) -> Section:
    """Every trajectory in the warehouse, one row per (policy, purpose) of policy_summary."""
    s = Section("Sampled trajectories")
    if not summaries:
        s.blocks.append("No trajectories yet.")
        return s
    headers = [
        "policy", "purpose", "trajectories", "rooms", "finished", "score", "coverage", "subagent calls",
        "chars delegated", "memo chars", "findings carried", "memo before last return",
        "r(calls, docs)", "r(calls, tokens)",
    ]  # fmt: skip
    rows = [
        [
            labels.get(r["policy_id"], r["policy_id"]),
            r["purpose"],
            str(r["n_trajectories"]),
            str(r["n_rooms"]),
            pct(r["finished_rate"]),
            pct(r["score"]),
            pct(r["coverage"]),
            fmt(r["subcalls"], "num1"),
            fmt(r["delegated_chars"], "int"),
            fmt(r["memo_chars"], "int"),
            pct(r["findings_carried"]),
            pct(r["memo_before_delegation_done"]),
            fmt(r["calls_size_corr"], "num2"),
            fmt(r["calls_tokens_corr"], "num2"),
        ]
        for r in summaries
    ]
    caption = "All trajectories in the warehouse by policy and purpose (train = sampled for distillation, eval = held-out)."
    s.blocks.append(Table(headers, rows, caption))
    return s


def funnel_section(
    selection: tuple[str, object] | None, rows: list[dict], out: Path
) -> tuple[Section, Path | None]:
    """The newest selection's rejection funnel: a bar chart of the overall row and a table per room."""
    s = Section("Rejection filter")
    if selection is None:
        s.blocks.append("No selection yet: run the filter stage.")
        return s, None
    sid, params = selection
    total = next((r for r in rows if r["room_id"] == ""), None)
    png = plots.funnel(total or {}, out / "rejection_funnel.png")
    if png:
        s.blocks.append(
            Image(png, f"Rejection funnel of selection {sid}: trajectories left after each rule.")
        )
    headers = (
        ["room"] + [name for _, name in plots.FUNNEL_STEPS] + ["acceptance", "cost (USD)", "USD per accepted"]
    )
    table = Table(
        headers,
        [],
        f"Selection {sid}; params {params}. Cost: sampling every trajectory of the row, and that per accepted training example.",
    )
    for r in rows:
        vals = [int(r[k] or 0) for k, _ in plots.FUNNEL_STEPS]
        table.rows.append(
            [r["room_id"] or "all rooms"]
            + [str(v) for v in vals]
            + [pct(vals[-1] / vals[0] if vals[0] else None)]
            + [usd(r.get("cost_usd")), usd(r.get("cost_per_accepted_usd"))]
        )
    s.blocks.append(table)
    return s, png


def training_section(runs: list[dict], logs: dict[str, list[dict]], out: Path) -> tuple[Section, Path | None]:
    """The loss curves of every training run and a table of the runs."""
    s = Section("Training")
    png = plots.training_loss(logs, out / "training_loss.png")
    if png:
        s.blocks.append(
            Image(png, "Training loss (solid) and validation loss (dashed, markers) per optimizer step.")
        )
    if runs:
        headers = [
            "train run", "dataset", "parent policy", "new policy", "status", "tokens", "seconds",
            "final loss", "final eval loss",
        ]  # fmt: skip
        rows = [
            [
                r["train_id"],
                r["dataset_id"],
                r["parent_policy_id"],
                r["policy_id"] or MISSING,
                r["status"],
                fmt(r["train_tokens"], "int"),
                fmt(r["train_seconds"], "num1"),
                fmt(r["final_train_loss"], "num2"),
                fmt(r["final_eval_loss"], "num2"),
            ]
            for r in runs
        ]
        s.blocks.append(Table(headers, rows))
    if not png and not runs:
        s.blocks.append("No training run yet.")
    return s, png


def agreement_section(rows: list[dict], check: list[dict] | None = None) -> Section | None:
    """The judge section: reference vs LLM judge on graded trajectories (pipeline.grading.agreement rows)
    and the newest ``judge-check`` (pipeline.grading.judge_check.latest_check); None when neither exists."""
    if not rows and not check:
        return None
    s = Section("Judge agreement")
    if rows:
        headers = [
            "llm judge", "criterion kind", "pairs", "ungraded", "agreement", "reference pass", "llm pass",
            "Cohen's kappa",
        ]  # fmt: skip
        s.blocks.append(
            Table(
                headers,
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
                "Reference judge vs LLM judge on the (trajectory, criterion) pairs both graded; "
                "ungraded verdicts excluded.",
            )
        )
    if check:
        first = check[0]
        valid = first["valid"] / first["criteria"] if first["criteria"] else None
        rate = first["criteria"] / first["seconds"] if first["seconds"] else None
        s.blocks.append(
            Table(
                [
                    "judge",
                    "against",
                    "memos",
                    "criterion kind",
                    "pairs",
                    "ungraded",
                    "agreement",
                    "truth pass",
                    "judge pass",
                    "Cohen's kappa",
                ],  # fmt: skip
                [
                    [
                        r["judge"],
                        r["against"],
                        r["memos"],
                        r["kind"],
                        str(r["n"]),
                        str(r["n_ungraded"]),
                        pct(r["agreement"]),
                        pct(r["truth_pass"]),
                        pct(r["judge_pass"]),
                        fmt(r["kappa"], "num2"),
                    ]
                    for r in check
                ],
                f"`judge-check` {first['check_id']} ({first['checked_at']:%Y-%m-%d %H:%M} UTC): known-answer and "
                "sampled memos through the LLM judge, against the reference judge (generated rooms) and CUAD's "
                f"expert labels (CUAD rooms). {first['criteria']} criteria, {pct(valid)} with a valid verdict, "
                f"{fmt(rate, 'num2')} criteria/s.",
            )
        )
    return s


def nightly_section(labels: dict[str, str], rounds: list[dict]) -> Section | None:
    """One row per champion decision: distill's round 0 and each nightly round; None before any."""
    if not rounds:
        return None
    table = Table(
        ["round", "started", "champion before", "candidate", "lift [95% CI]", "decision"],
        [
            [
                r["round_id"],
                f"{r['started_at']:%Y-%m-%d %H:%M}",
                labels.get(r["champion_before"], r["champion_before"]),
                labels.get(r["candidate_policy_id"], r["candidate_policy_id"] or MISSING),
                pts_ci(r["lift"], r["lift_ci_low"], r["lift_ci_high"]),
                r["decision"],
            ]
            for r in rounds
        ],
    )
    return Section("Champion rounds (distill round 0, then nightly)", [table])


def _counts_text(counts: object) -> str:
    """A stage run's counts as 'k=v, ...' (stored as JSON text); its headline is shown elsewhere."""
    if isinstance(counts, str):
        try:
            counts = json.loads(counts)
        except json.JSONDecodeError:
            pass
    if isinstance(counts, dict):
        counts = ", ".join(f"{k}={v}" for k, v in counts.items() if k not in ("run_id", "headline"))
    return str(counts or "")


def metadata_section(
    cfg: PipelineConfig, schema_version: int, sandbox_levels: str, stage_runs: list[dict], built_at: str
) -> Section:
    """Config hash, where the database is, the schema version, sandbox levels and every stage run."""
    s = Section("Run metadata")
    db_rel = os.path.relpath(Path(cfg.run.db_path).resolve(), Path(cfg.run.dir).resolve())
    s.blocks.append(
        Table(
            ["field", "value"],
            [
                ["config hash", cfg.hash()],
                ["database (relative to run dir)", db_rel],
                ["schema version", str(schema_version)],
                ["REPL sandbox levels (trajectories)", sandbox_levels],
                ["report built", built_at],
            ],
        )
    )
    table = Table(["stage", "run id", "status", "started", "seconds", "config hash", "counts"], [])
    for r in stage_runs:
        secs = (r["ended_at"] - r["started_at"]).total_seconds() if r["ended_at"] else None
        text = _counts_text(r["counts"])
        if r["error"]:
            text = f"{text} ERROR: {r['error']}".strip()
        table.rows.append(
            [r["stage"], r["run_id"], r["status"], f"{r['started_at']:%Y-%m-%d %H:%M:%S}",
             fmt(secs, "num1"), r["config_hash"], text[:300]]
        )  # fmt: skip
    s.blocks.append(table if table.rows else "No stage runs recorded.")
    return s


def rl_section(
    labels: dict[str, str],
    steps: dict[str, list[dict]],
    eval_rows: list[dict],
    out: Path,
    scale: dict[str, dict[str, float]] | None = None,
) -> tuple[Section | None, Path | None]:
    """GRPO runs: reward per step with its band, rollout time per step, the reward-hacking watch (with the
    known-answer memos of the run's rooms, ``scale``: rl_id -> memo -> mean headline); None before any."""
    if not steps:
        return None, None
    s = Section("Reinforcement learning (GRPO on the root)")
    png = plots.rl_rewards(steps, out / "rl_rewards.png")
    if png:
        s.blocks.append(
            Image(
                png,
                "Left: mean reward (the reference judge's headline) of each step's rollouts, band = 95% normal "
                "interval of the mean. Right: wall time of each step's rollouts (episodes with REPL and subagents).",
            )
        )
    headers = [
        "rl run", "step", "rollouts", "reward [95% band]", "zero-adv. groups", "replacements (used)", "failed",
        "IS ratio mean / max / clipped", "probe", "loss", "grad norm", "copied memos", "over budget", "watch",
        "rollout s", "grade s", "sync s", "update s",
    ]  # fmt: skip
    rows = [
        [
            r["rl_id"],
            str(r["step"]),
            str(r["n_rollouts"]),
            f"{fmt(r['reward_mean'], 'num2')} [{fmt(r['reward_band_low'], 'num2')}, {fmt(r['reward_band_high'], 'num2')}]",
            pct(r["zero_advantage_share"]),
            f"{fmt(r.get('n_replacement_groups'), 'int')} ({fmt(r.get('n_replaced'), 'int')})",
            fmt(r.get("n_failed"), "int"),
            f"{fmt(r.get('ratio_mean'), 'num2')} / {fmt(r.get('ratio_max'), 'num2')} / {pct(r.get('ratio_clipped_share'))}",
            fmt(r.get("probe_logprob_diff"), "num2"),
            fmt(r["loss"], "num2"),
            fmt(r["grad_norm"], "num2"),
            str(r["n_copied"]),
            str(r["n_over_budget"]),
            "—" if r.get("watch") is None else (r["watch"] or "ok"),
            fmt(r["rollout_s"], "num1"),
            fmt(r["grade_s"], "num1"),
            fmt(r["sync_s"], "num1"),
            fmt(r["update_s"], "num1"),
        ]
        for rows_ in steps.values()
        for r in rows_
    ]
    s.blocks.append(
        Table(
            headers,
            rows,
            "Per step: groups drawn on other rooms for flat ones (and how many took a flat group's place); "
            "rollouts that failed on the server (no reward, no advantage); the importance ratio "
            "trainer / sampler probability of the root's tokens (mean, max, share clipped at rl.importance_cap); "
            "the weight probe (nats per token between the server's module and the trainer); the reward-hacking "
            "watch: memos the judge set aside as copied from the room, memos past the reading budget, and the "
            "rl.watch thresholds the step crossed.",
        )
    )
    for rl_id, rows_ in steps.items():
        first, last = rows_[0], rows_[-1]
        policy = first.get("policy_id")
        lift = next(
            (e for e in eval_rows if e.get("policy_id") == policy and e.get("metric") == "lift"), None
        )
        if lift is None or first["reward_mean"] is None or last["reward_mean"] is None:
            continue
        rose = last["reward_mean"] > first["reward_mean"]
        fell = lift["value"] is not None and lift["value"] < 0
        verdict = (
            "the reward rose while the held-out score fell: the policy may be learning what the judge overpays"
            if rose and fell
            else "reward and held-out score moved together"
            if rose == (not fell)
            else "the reward did not rise"
        )
        s.blocks.append(
            f"{rl_id}: reward {first['reward_mean']:.3f} at step 1 → {last['reward_mean']:.3f} at step "
            f"{last['step']}; held-out lift of {labels.get(policy, policy)} over its start "
            f"{pts_ci(lift['value'], lift['ci_low'], lift['ci_high'])}: {verdict}."
        )
    for rl_id, memos in (scale or {}).items():
        if memos and rl_id in steps:
            best = max((r["reward_mean"] for r in steps[rl_id] if r["reward_mean"] is not None), default=None)
            s.blocks.append(
                Table(
                    ["memo", "headline on the run's rooms"],
                    [[f"{rl_id}: best step's mean reward", fmt(best, "num2")]]
                    + [[m, fmt(v, "num2")] for m, v in memos.items()],
                    f"{rl_id}: the known-answer memos of the rooms its rollouts were drawn from, graded by the "
                    "same judge: a mean reward near near_copy, claim_stuffing or repetition rather than near "
                    "oracle or paraphrase says what the policy found.",
                )
            )
    for rl_id, rows_ in steps.items():
        table = rl_before_after(labels, rl_id, rows_[0], eval_rows)
        if table:
            s.blocks.append(table)
    return s, png


def rl_before_after(labels: dict[str, str], rl_id: str, step: dict, eval_rows: list[dict]) -> Table | None:
    """Held-out score, coverage and behaviour of an RL run's start and its policy (the report's Figure 13 /
    Table 2 as numbers), from the newest evaluation when it holds both; None otherwise."""
    by = by_policy(eval_rows)
    start, policy = step.get("start_policy_id"), step.get("policy_id")
    if start not in by or policy not in by:
        return None
    table = Table(
        ["held-out", f"start: {labels.get(start, start)}", f"after RL: {labels.get(policy, policy)}"],
        [],
        f"{rl_id}: before and after, on the newest evaluation's held-out rooms (score and coverage "
        "with 95% bootstrap intervals over rooms; behaviour as in the evaluation's behaviour table).",
    )

    def ci(pid: str, metric: str) -> str:
        r = by[pid].get(metric)
        return pct_ci(r["value"], r["ci_low"], r["ci_high"]) if r else MISSING

    for metric, label in (("score", "score"), ("coverage", "coverage"), ("finished_rate", "finished")):
        table.rows.append([label, ci(start, metric), ci(policy, metric)])
    for metric in BEHAVIOUR:
        values = [by[p].get(metric.name, {}).get("value") for p in (start, policy)]
        if any(v is not None for v in values):
            table.rows.append([metric.label] + [fmt(v, metric.kind) for v in values])
    return table
