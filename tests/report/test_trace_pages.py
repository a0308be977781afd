"""Trajectory pages, the list page and `pipeline show`, on a warehouse of real traces (tests/report/trace_world.py).

The pages are rendered in headless Chromium: the report links to a page, the
page marks passed and failed criteria on the memo, a cut subagent text loads
in full from its sidecar, and the list filtered by a rejection reason shows
only those trajectories.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
from contextlib import closing
from pathlib import Path

import pytest

from pipeline import db
from pipeline.cli import main
from tests.browser import dump_dom

pytestmark = pytest.mark.slow


def _rows(cfg, sql, params=()):
    with closing(db.connect(cfg.run.db_path, read_only=True)) as con:
        return con.execute(sql, list(params)).fetchall()


def test_report_links_to_a_page_that_marks_the_memo(world, tmp_path):
    cfg, out = world
    dom = dump_dom((out / "report.html").as_uri(), tmp_path / "p1")
    hrefs = re.findall(r'href="(trajectories/t-[0-9a-f]+\.html)"', dom)
    assert hrefs, "the report links to no trajectory page"
    # every page the report links to exists; open the best trajectory of the held-out room
    assert all((out / h).exists() for h in hrefs)
    best = re.search(r"<td>world-heldout</td>.*?href=\"(trajectories/t-[0-9a-f]+\.html)\"", dom, re.DOTALL)
    page = dump_dom((out / best.group(1)).as_uri(), tmp_path / "p2")
    memo = page.split('id="memo"', 1)[1].split("<h2>", 1)[0]
    assert re.search(r'class="unit pass[^"]*" id="u\d+"', memo)
    passed = re.findall(r'class="mark pass" href="#c-([^"]+)"', memo)
    assert passed
    # a mark says what the judge recorded: the criterion passed in this very unit
    tid = best.group(1).split("/")[1].removesuffix(".html")
    verdicts = dict(
        _rows(
            cfg,
            "select criterion_id, passed from grades where trajectory_id = ? and judge = 'reference'",
            [tid],
        )
    )
    assert all(verdicts[c] for c in passed)
    # the memo with every other issue: failed criteria marked with what the closest unit lacks
    mixed = [
        t
        for (t,) in _rows(
            cfg,
            "select trajectory_id from trajectory_scores where purpose = 'eval' and score between 0.05 and 0.95",
        )
    ]
    assert mixed
    page = dump_dom((out / "trajectories" / f"{mixed[0]}.html").as_uri(), tmp_path / "p3")
    memo = page.split('id="memo"', 1)[1].split("<h2>", 1)[0]
    assert 'class="mark pass"' in memo and re.search(r'class="mark fail"[^>]*>✗ \S+ lacks \S', memo)
    assert "copied from the room" in memo and "false claim:" in memo
    assert 'id="coverage-strip"' in page and "llm_batch:" in page
    assert '<span class="k">for</span>' in page  # code highlighted by Pygments


def test_cut_subagent_texts_and_calls_load_from_the_sidecar(world, tmp_path):
    cfg, out = world
    (tid, call, prompt) = _rows(
        cfg,
        "select trajectory_id, call_index, prompt from subcalls where length(prompt) > 1000 "
        "and trajectory_id in (select trajectory_id from trajectory_scores where purpose = 'eval') "
        "order by trajectory_id, call_index limit 1",
    )[0]
    html = (out / "trajectories" / f"{tid}.html").read_text()
    assert prompt not in html and "more characters: show all]" in html
    probe = f"""<script>window.addEventListener("load", function () {{
      var b = document.querySelector('button.full[data-call="{call}"][data-field="p"]');
      var pre = b.previousElementSibling; b.click();
      document.querySelectorAll("button.more").forEach(function (m) {{ m.click(); }});
      setTimeout(function () {{ var o = document.createElement("pre"); o.id = "probe";
        o.textContent = pre.textContent.length + " " + document.querySelectorAll("details.call").length;
        document.body.appendChild(o); }}, 1000);
    }});</script>"""
    copy = out / "trajectories" / f"probe-{tid}.html"  # beside the page, so its sidecar path resolves
    copy.write_text(html.replace("</body>", probe + "</body>"))
    try:
        dom = dump_dom(copy.as_uri(), tmp_path / "p")
    finally:
        copy.unlink()
    full, calls = re.search(r'<pre id="probe">(\d+) (\d+)</pre>', dom).groups()
    assert full == str(len(prompt))
    # batches longer than the page shows: "show N more calls" brought every call of the trajectory
    assert "show " in html and " more calls</button>" in html
    assert int(calls) == _rows(cfg, "select count(*) from subcalls where trajectory_id = ?", [tid])[0][0]


def test_list_filtered_by_rejection_reason(world, tmp_path):
    cfg, out = world
    counts = dict(_rows(cfg, "select reason, count(*) from stg_selections group by reason"))
    assert len(counts) >= 2, counts  # the world's memos make the filter decide more than one way
    total = _rows(cfg, "select count(*) from trajectories")[0][0]
    for reason, n in counts.items():
        dom = dump_dom(
            (out / "trajectories" / "index.html").as_uri() + f"#reason={reason}", tmp_path / reason
        )
        body = dom.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
        shown = re.findall(r'<tr data-reason="([^"]+)">', body)
        assert shown == [reason] * n
        assert f"{n} of {total} trajectories" in dom


def test_show_prints_the_page_and_one_line_for_an_unknown_id(world, tmp_path, capsys):
    cfg, _ = world
    run = shutil.copytree(cfg.run.dir, tmp_path / "run")
    (tid,) = _rows(cfg, "select trajectory_id from trajectories order by trajectory_id limit 1")[0]
    assert main(["show", tid, f"run.dir={run}"]) == 0
    path = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert path == run / "report" / "trajectories" / f"{tid}.html" and path.exists()
    assert main(["show", "t-nosuchtrajectory", f"run.dir={run}"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "t-nosuchtrajectory" in err


def test_show_on_the_tiny_distill_run(distilled, tmp_path):
    run = distilled.copy(tmp_path / "run")
    with closing(db.connect(run / "pipeline.duckdb", read_only=True)) as con:
        (tid,) = con.execute(
            "select trajectory_id from trajectories order by purpose, trajectory_id limit 1"
        ).fetchone()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["show", tid, f"run.dir={run}"]) == 0
    page = Path(out.getvalue().strip().splitlines()[-1])
    html = page.read_text()
    assert f"Trajectory {tid}" in html and "Root turns and subagent calls" in html
