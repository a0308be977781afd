"""The trajectory list page (``trajectories/index.html``): every trajectory, filtered in the browser.

Rows are embedded in the page as JSON and filtered by a few lines of plain
JavaScript (assets/list.js): by policy, room, purpose, status, score range
and the filter's decision. It needs no server and fetches nothing, so it
works opened from a file:// URL; the filters live in the URL's hash
(``index.html#reason=score``), which is how the report links to them.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from pipeline.report.trace_page import ASSETS

# The list's "reason" for trajectories the selection did not decide on.
HELD_OUT = "held-out"
NOT_SELECTED = "not in selection"


def reason(row: dict) -> str:
    if row.get("filter_reason") is not None:
        return row["filter_reason"]
    return HELD_OUT if row["purpose"] == "eval" else NOT_SELECTED


def list_rows(rows: list[dict], labels: dict[str, str], links: dict[str, str], subdir: str) -> list[dict]:
    """The JSON rows of the page; ``href`` is relative to the list page itself (same folder as the pages)."""
    out = []
    for r in rows:
        href = links.get(r["trajectory_id"])
        out.append(
            {
                "id": r["trajectory_id"],
                "href": href.removeprefix(f"{subdir}/") if href else None,
                "policy": labels.get(r["policy_id"], r["policy_id"]),
                "room": r.get("room_name") or r["room_id"],
                "purpose": r["purpose"],
                "status": r["status"],
                "score": r.get("score"),
                "coverage": r.get("coverage"),
                "cost": float(r.get("cost_usd") or 0.0),
                "reason": reason(r),
            }
        )
    return out


def write(
    out_dir: Path, rows: list[dict], labels: dict[str, str], links: dict[str, str], subdir: str
) -> Path:
    data = json.dumps(list_rows(rows, labels, links, subdir)).replace("</", "<\\/")
    filters = "".join(
        f'<label>{k} <select id="f-{k}"><option value="">all</option></select></label> '
        for k in ("policy", "room", "purpose", "status", "reason")
    )
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Trajectories</title>
<style>{(ASSETS / "trace.css").read_text()} label {{ margin-right: .8em; font-size: .9em; }}
input[type=number] {{ width: 5em; }}</style></head><body>
<p><a href="../report.html">← report</a></p>
<h1>Trajectories</h1>
<form onsubmit="return false">{filters}
<label>score from <input type="number" id="f-min" min="0" max="100" step="1"> to
<input type="number" id="f-max" min="0" max="100" step="1"> %</label></form>
<p id="count"></p>
<table id="list"><thead><tr><th>trajectory</th><th>policy</th><th>room</th><th>purpose</th><th>status</th>
<th>score</th><th>coverage</th><th>cost (USD)</th><th>filter decision</th></tr></thead><tbody></tbody></table>
<p class="legend">Filter decision: accepted, the first rule of the newest selection that rejected it, {html.escape(HELD_OUT)}
(evaluation samples are never filtered) or {html.escape(NOT_SELECTED)}. Cost 0: unpriced or embedded models.</p>
<script type="application/json" id="rows">{data}</script>
<script>{(ASSETS / "list.js").read_text()}</script>
</body></html>
"""
    path = out_dir / "index.html"
    path.write_text(page)
    return path
