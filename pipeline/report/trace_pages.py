"""The trajectory pages of a run: which trajectories get one, and the list page that links them.

    write_all(con, cfg, report_dir, labels, selection_id)   (the report stage)
    write_one(con, cfg, trajectory_id)                      (`python -m pipeline show <id>`)

Pages go to ``<run.dir>/report/trajectories/``: one per held-out trajectory
and per training trajectory the newest selection decided on (accepted or
rejected), and ``index.html``, the list with filters. Memos are read again by
the reference judge of the trajectory's room (pipeline.report.memo_marks),
one room at a time, as the grade stage reads them.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from pipeline.config import PipelineConfig
from pipeline.grading.grade_run import RoomGraders
from pipeline.report import data, trace_data, trace_list
from pipeline.report.memo_marks import MarkedMemo, mark
from pipeline.report.trace_page import write_page

DIR = "trajectories"


def has_page(row: dict) -> bool:
    """Held-out trajectories and those the selection decided on."""
    return row["purpose"] == "eval" or row.get("filter_reason") is not None


def _marked(view: trace_data.TraceView, graders: RoomGraders) -> MarkedMemo | None:
    reference = [g for g in view.grades if g["judge"] == "reference"]
    if not reference or not view.row.get("memo"):
        return None
    return mark(view.row["memo"], graders(view.row["room_id"]), reference)


def write_all(
    con: duckdb.DuckDBPyConnection,
    cfg: PipelineConfig,
    report_dir: Path,
    labels: dict[str, str],
    selection_id: str | None,
) -> dict[str, str]:
    """Write every page and the list; returns trajectory id -> page path relative to ``report_dir``."""
    out = report_dir / DIR
    out.mkdir(parents=True, exist_ok=True)
    rows = trace_data.trajectory_rows(con, selection_id)
    graders = RoomGraders(con, cfg.grade.budget_words)
    links: dict[str, str] = {}
    written: set[str] = set()
    for row in sorted((r for r in rows if has_page(r)), key=lambda r: r["room_id"]):
        view = trace_data.load(con, row["trajectory_id"], selection_id, row)
        path = write_page(
            view,
            _marked(view, graders),
            out,
            labels.get(row["policy_id"], row["policy_id"]),
            "../report.html",
        )
        links[row["trajectory_id"]] = f"{DIR}/{path.name}"
        written |= {p.name for p in out.glob(f"{row['trajectory_id']}.*")}
    written.add(trace_list.write(out, rows, labels, links, DIR).name)
    # pages of trajectories no longer in the warehouse (or a selection) must not survive a rebuild
    for old in out.iterdir():
        if old.name not in written:
            old.unlink()
    return links


def write_one(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, trajectory_id: str) -> Path:
    """The page of one trajectory, under the run's report folder; an unknown id is a UserError."""
    selection = data.latest_selection(con)
    view = trace_data.load(con, trajectory_id, selection[0] if selection else None)
    labels = data.policy_labels(con)
    out = Path(cfg.run.dir) / "report" / DIR
    graders = RoomGraders(con, cfg.grade.budget_words)
    return write_page(
        view,
        _marked(view, graders),
        out,
        labels.get(view.row["policy_id"], view.row["policy_id"]),
        "../report.html",
    )
