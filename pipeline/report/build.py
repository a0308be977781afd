"""The whole report: read the warehouse, build the sections, write HTML, Markdown and PNGs.

Always rebuilt whole: it is cheap and must reflect the warehouse as it is now.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from pipeline import costs, db
from pipeline.config import PipelineConfig
from pipeline.grading.agreement import agreement_report
from pipeline.grading.judge_check import latest_check
from pipeline.report import data, sections, trace_data, trace_pages
from pipeline.report.cost_section import cost_section
from pipeline.report.known_answers import known_answer_scale, known_answers_section
from pipeline.report.ladder_section import ladder_section
from pipeline.report.render import Section, to_html, to_markdown
from pipeline.report.trace_sections import trajectories_to_read

TITLE = "RLM root self-distillation report"
# The published reference this pipeline mirrors (GLM-5.2 root, 20 held-out rooms).
REFERENCE = (
    "Reference report: base 46.1% → SFT 60.1% on 20 held-out rooms; calls/size correlation 0.17 → 0.84."
)


def build(
    con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, out: Path
) -> tuple[str, list[Section], list[Path]]:
    """Headline, sections and the PNGs written under ``out``."""
    labels = data.policy_labels(con)
    eval_id, eval_rows, n_evals = data.latest_evaluation(con)
    scores = data.trajectory_scores(con)
    top = sections.headline_text(labels, eval_rows)

    figures, pngs = sections.figures_section(labels, scores, eval_rows, data.room_scores(con, "eval"), out)
    selection = data.latest_selection(con)
    funnel, funnel_png = sections.funnel_section(
        selection, data.funnel_rows(con, selection[0]) if selection else [], out
    )
    training, training_png = sections.training_section(data.train_runs(con), data.train_logs(con), out)
    scale = {rl_id: known_answer_scale(con, rooms) for rl_id, rooms in data.rl_rooms(con).items()}
    rl, rl_png = sections.rl_section(labels, data.rl_steps(con), eval_rows, out, scale)
    pngs += [p for p in (funnel_png, training_png, rl_png) if p]
    summaries = data.policy_summaries(con)
    cost, cost_pngs = cost_section(
        data.model_prices(con), costs.embedded(cfg), summaries, data.room_policy_rows(con), labels, out
    )
    pngs += cost_pngs
    selection_id = selection[0] if selection else None
    links = trace_pages.write_all(con, cfg, out, labels, selection_id)
    to_read = trajectories_to_read(trace_data.trajectory_rows(con, selection_id), labels, links)
    ladder = ladder_section(con, labels)
    optional = [
        sections.agreement_section(agreement_report(con), latest_check(con)),
        sections.nightly_section(labels, data.nightly_rounds(con)),
    ]
    metadata = sections.metadata_section(
        cfg,
        db.schema_version(con),
        data.sandbox_levels(con),
        data.stage_runs(con),
        f"{db.now():%Y-%m-%d %H:%M:%S} UTC",
    )
    built = [
        Section("Headline", [top, REFERENCE]),
        figures,
        sections.evaluation_section(labels, eval_id, eval_rows, n_evals),
        known_answers_section(con, labels, eval_rows),
        *([ladder] if ladder else []),
        sections.trajectories_section(labels, summaries),
        to_read,
        funnel,
        cost,
        training,
        *([rl] if rl else []),
        *[s for s in optional if s],
        metadata,
    ]
    return top, built, pngs


def write(
    con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, out: Path
) -> tuple[str, list[Section], list[Path]]:
    """Build the report into ``out`` (report.html, report.md, *.png); returns what build() returned."""
    out.mkdir(parents=True, exist_ok=True)
    top, built, pngs = build(con, cfg, out)
    # A plot with no data this time must not survive from an earlier build.
    for old in out.glob("*.png"):
        if old not in pngs:
            old.unlink()
    (out / "report.md").write_text(to_markdown(TITLE, built))
    (out / "report.html").write_text(to_html(TITLE, built, headline=top))
    return top, built, pngs
