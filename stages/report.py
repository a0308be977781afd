"""Stage `report`: the run's results as one HTML page, the same in Markdown, and PNG plots.

    python -m pipeline --recipe <recipe> report      (or ``stages.report.run(cfg)``)

Reads only the warehouse (tables evaluations, policies, train_runs,
train_logs, nightly_rounds, stage_runs, selections, grades; views
trajectory_scores, policy_summary, room_policy_summary and
rejection_funnel) and writes ``<run.dir>/report/``: ``report.html``
(self-contained: plots embedded as data URIs), ``report.md``, the plots
as ``*.png``, and ``trajectories/``: a page per held-out and filtered
trajectory and a list page with filters (pipeline.report.trace_pages).
It first records the config's model prices (table model_prices), which the
marts' cost columns use. Opens with the headline — base vs SFT held-out headline score with
95% bootstrap intervals and the paired lift — then plots (score vs
coverage, base vs SFT per held-out room, rejection funnel, training loss,
delegation vs room size) and tables (per-policy evaluation, the behaviour
table of the reference report, sampled trajectories, judge agreement,
nightly rounds, run metadata). Anything not produced yet is a note, not an
error, so the report can be built after any stage. Always rebuilt whole:
it is cheap and must reflect the warehouse as it is now. The report itself
is built by pipeline.report.build.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from pipeline import costs, db
from pipeline.config import PipelineConfig
from pipeline.report.build import write


def run(cfg: PipelineConfig) -> dict:
    out = Path(cfg.run.dir) / "report"
    with closing(db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)) as con:
        with db.stage_run(con, "report", cfg.hash()) as counts:
            costs.record_prices(con, cfg)  # the marts price tokens from this table
            top, sections, pngs = write(con, cfg, out)
            # relative to the run folder, as every path the warehouse keeps
            counts.update(report="report/report.html", plots=len(pngs), sections=len(sections), headline=top)
            print(top)
            print(f"report: {out / 'report.html'}")
        return counts
