"""One trajectory as a static HTML page: room and policy, the root's turns, subagent batches, the marked memo.

    write_page(view, marked, out_dir, labels)  ->  out_dir/<trajectory_id>.html

The page is built to stay small for a 5,000-document room: each subagent
prompt and answer is cut to its first ``CUT_CHARS`` characters with a
``[... N more characters]`` marker, a batch shows its first ``CALLS_SHOWN``
calls, and the full texts of every call sit in sidecar scripts of ``CHUNK``
calls each (``<id>.calls-<k>.js``), loaded only when asked for (a script
tag, so it works from a file:// URL). Code is highlighted by Pygments.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import orjson
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from pipeline.report import formatting as f
from pipeline.report.memo_marks import MarkedMemo, missing_of, unit_of
from pipeline.report.trace_data import Batch, TraceView

CUT_CHARS = 400  # characters of a subagent prompt or answer shown on the page
CALLS_SHOWN = 10  # calls of a batch on the page; the rest on demand from the sidecar
CHUNK = 200  # calls per sidecar script
ASSETS = Path(__file__).parent / "assets"
REASONS = {
    "accepted": "accepted as a training example",
    "not_finished": "rejected: the root did not submit a memo",
    "score": "rejected: headline score below the filter's bar (filter.min_score / min_relative)",
    "coverage": "rejected: probe coverage below filter.min_coverage",
    "trap": "rejected: flagged more decoys than filter.max_trap_failures",
    "too_long": "rejected: longer than filter.max_root_chars",
    "lineage": "rejected: sampled by a policy outside filter.policy_lineage",
    "duplicate": "rejected: the same code as a better trajectory on this room",
}
_FORMATTER = HtmlFormatter(cssclass="highlight")
e = html.escape


def page_name(trajectory_id: str) -> str:
    return f"{trajectory_id}.html"


def _first_line(text: str | None) -> str:
    return next((line for line in (text or "").splitlines() if line.strip()), "")


def _cut(text: str | None, call: int, field: str) -> str:
    text = text or ""
    if len(text) <= CUT_CHARS:
        return f"<pre>{e(text)}</pre>"
    more = len(text) - CUT_CHARS
    return (
        f"<pre>{e(text[:CUT_CHARS])}</pre>"
        f'<button class="full" data-call="{call}" data-field="{field}">[... {more:,} more characters: show all]</button>'
    )


def _call(c: dict) -> str:
    answer, field = (c["error"], "e") if c["error"] else (c["response"], "r")
    head = (
        f"#{c['call_index']} · {c['prompt_tokens']}+{c['completion_tokens']} tok · {c['latency_s']:.1f} s"
        + (" · ERROR " if c["error"] else " · ")
        + f'<span class="first">{e(_first_line(c["prompt"])[:110])} → {e(_first_line(answer)[:110])}</span>'
    )
    return (
        f'<details class="call"><summary>{head}</summary><div class="muted">prompt</div>'
        f'{_cut(c["prompt"], c["call_index"], "p")}<div class="muted">{"error" if c["error"] else "answer"}</div>'
        f"{_cut(answer, c['call_index'], field)}</details>"
    )


def _batch(b: Batch) -> str:
    kind = "llm_query" if len(b.calls) == 1 else "llm_batch"
    errors = f", {b.errors} errors" if b.errors else ""
    out = [
        f'<div class="batch"><div class="summary">{kind}: {len(b.calls):,} calls · '
        f"{b.prompt_tokens:,} tokens in, {b.completion_tokens:,} out · {b.seconds:.1f} s{errors}</div>"
    ]
    out += [_call(c) for c in b.calls[:CALLS_SHOWN]]
    if len(b.calls) > CALLS_SHOWN:
        first, last = b.calls[CALLS_SHOWN]["call_index"], b.calls[-1]["call_index"]
        out.append(
            f'<button class="more" data-from="{first}" data-to="{last}">show {len(b.calls) - CALLS_SHOWN:,} more calls</button>'
        )
    out.append("</div>")
    return "".join(out)


def _turn(t: dict, batches: list[Batch]) -> str:
    secs = (t["ended_s"] or 0) - (t["started_s"] or 0)
    out = [
        f'<div class="turn" id="turn-{t["turn_index"]}"><h3>Turn {t["turn_index"]} '
        f'<span class="muted">· {t["prompt_tokens"]:,} tokens in, {t["completion_tokens"]:,} out · '
        f"{secs:.1f} s</span></h3>"
    ]
    if t.get("reasoning"):
        out.append(f"<details><summary>reasoning</summary><pre>{e(t['reasoning'])}</pre></details>")
    out.append(f"<details><summary>the root's reply</summary><pre>{e(t['completion'] or '')}</pre></details>")
    if t["code"]:
        out.append(highlight(t["code"], PythonLexer(), _FORMATTER))
    else:
        out.append('<p class="muted">no code this turn</p>')
    if t["output"]:
        out.append(f'<div class="muted">REPL output (as the root saw it)</div><pre>{e(t["output"])}</pre>')
    if t["error"]:
        out.append(f'<div class="muted">error</div><pre>{e(t["error"])}</pre>')
    out += [_batch(b) for b in batches]
    out.append("</div>")
    return "".join(out)


def _decision(view: TraceView) -> str:
    reason = view.row.get("filter_reason")
    if reason is None:
        why = "held-out trajectory: evaluated, never filtered" if view.row["purpose"] == "eval" else (
            "not in the newest selection" if view.selection_id else "no selection yet (run the filter stage)")  # fmt: skip
        return f'<p class="decision">Filter: {e(why)}.</p>'
    cls = "accepted" if view.row.get("filter_accepted") else "rejected"
    text = REASONS.get(reason, f"rejected: {reason}")
    return f'<p class="decision {cls}" id="decision">Filter ({e(view.selection_id or "")}): {e(text)} [{e(reason)}].</p>'


def _coverage(rows: list[dict]) -> str:
    """A heat strip drawn by the page's script on a canvas from compact JSON: a 5,000-document room
    has thousands of folders, and a DOM node (or table row) per folder made its page slow to load."""
    by: dict[str, dict[str, tuple[int, int]]] = {}
    for r in rows:
        by.setdefault(r["folder"], {})[r["scope"]] = (r["n_seen"], r["n_probes"])
    folders = [
        [name, s["all"][1], s["all"][0], s.get("root", (0, 0))[0], s.get("subagent", (0, 0))[0]]
        for name, s in by.items()
        if "all" in s
    ]
    if not folders:
        return "<p>No coverage by folder recorded (run the grade stage).</p>"
    data = json.dumps(folders).replace("</", "<\\/")
    return (
        '<canvas id="coverage-strip" class="strip" width="1150" height="26"></canvas>'
        f'<div class="legend" id="coverage-tip">{len(folders):,} folders, one cell each in path order; colour '
        "from red (no probe seen) to green (all seen); hover for numbers.</div>"
        f'<details id="coverage-details"><summary>by folder ({len(folders):,})</summary>'
        '<table id="coverage-table"></table></details>'
        f'<script type="application/json" id="coverage-data">{data}</script>'
    )


def _memo(marked: MarkedMemo | None, view: TraceView) -> str:
    memo = view.row.get("memo")
    if not memo:
        return "<p>No memo: the root never submitted one.</p>"
    if marked is None:
        return f"<p class=muted>Not graded by the reference judge yet.</p><pre>{e(memo)}</pre>"
    out = ['<div class="memo" id="memo">']
    for u in marked.units:
        marks, classes = [], []
        for v in u.passed:
            classes.append("pass")
            marks.append(
                f'<a class="mark pass" href="#c-{e(v["criterion_id"])}">✓ {e(v["criterion_id"])} {e(v["kind"] or "")}</a>'
            )
        for v in u.closest:
            classes.append("closest")
            marks.append(
                f'<a class="mark fail" href="#c-{e(v["criterion_id"])}">✗ {e(v["criterion_id"])} lacks {e(missing_of(v["reason"]))}</a>'
            )
        for v in u.flagged_decoys:
            classes.append("decoy")
            marks.append(
                f'<a class="mark decoy" href="#c-{e(v["criterion_id"])}">decoy flagged: {e(v["criterion_id"])}</a>'
            )
        for claim in u.false_claims:
            classes.append("false")
            marks.append(f'<span class="mark false">false claim: {e(claim)}</span>')
        if u.copied:
            classes.append("copied")
            marks.append(
                f'<span class="mark copied">copied from the room ({u.quoted_words} words): read as nothing</span>'
            )
        elif u.quoted_words:
            marks.append(f'<span class="mark copied">{u.quoted_words} copied words cut out</span>')
        if u.repeat:
            classes.append("copied")
            what = "repeats an earlier unit: set aside" + (
                ", its claims false" if u.repeat == "padding" else ""
            )
            marks.append(f'<span class="mark copied">{what}</span>')
        label = f"unit {u.number}" if u.number else ("repeat: not read" if u.repeat else "copied: not read")
        extra = (
            f"<details><summary>as the judge read it</summary><pre>{e(u.read_as)}</pre></details>"
            if u.read_as
            else ""
        )
        uid = f' id="u{u.number}"' if u.number else ""
        out.append(
            f'<div class="unit {" ".join(dict.fromkeys(classes))}"{uid}><span class="muted">{label}</span> '
            f'<span class="text">{e(u.text)}</span><div>{"".join(marks)}</div>{extra}</div>'
        )
    if marked.unread:
        out.append(
            f'<div class="unit unread"><span class="muted">past the reading budget ({marked.budget_words} of '
            f'{marked.memo_words} words read): not graded</span><div class="text">{e(marked.unread)}</div></div>'
        )
    out.append("</div>")
    return "".join(out)


def _criteria(grades: list[dict]) -> str:
    if not grades:
        return "<p>No verdicts yet.</p>"
    rows = []
    for g in grades:
        verdict = "ungraded" if g["passed"] is None else ("pass" if g["passed"] else "fail")
        if g["is_trap"]:
            verdict = {"pass": "decoy not flagged", "fail": "decoy flagged"}.get(verdict, verdict)
        n = unit_of(g["reason"] or "") if g["judge"] == "reference" else None
        where = f'<a href="#u{n}">unit {n}</a>' if n else "–"
        cls = "verdict-pass" if g["passed"] else ("verdict-fail" if g["passed"] is False else "")
        cid = f' id="c-{e(g["criterion_id"])}"' if g["judge"] == "reference" else ""
        rows.append(
            f'<tr class="{cls}"{cid}><td>{e(verdict)}</td><td>{e(g["criterion_id"])}</td><td>{e(g["kind"] or "")}</td>'
            f"<td>{e(g['text'] or '')}</td><td>{where}</td><td>{e(g['reason'] or '')}</td><td>{e(g['judge'])}</td></tr>"
        )
    return (
        "<table id=criteria><tr><th>verdict</th><th>criterion</th><th>kind</th><th>what it asks</th><th>where</th>"
        f"<th>the judge's reason (passed: the unit; failed: what the closest unit lacks)</th><th>judge</th></tr>{''.join(rows)}</table>"
    )


def _facts(view: TraceView, label: str) -> str:
    r, p = view.row, view.policy
    cost = r.get("cost_usd")
    items = [
        ("room", f"{r.get('room_name') or r['room_id']} ({r.get('room_n_documents') or 0:,} documents, "
                 f"{r.get('room_n_tokens') or 0:,} tokens, split {r.get('room_split')})"),
        ("policy", f"{label} · {p['policy_id']} · base {p.get('base_model')} · adapter {p.get('adapter') or 'none'}"
                   f" · prompt {p.get('prompt')} · harness {p.get('harness')}"),
        ("purpose / sample", f"{r['purpose']} / {r['sample_index']}"),
        ("status", f"{r['status']} ({r.get('end_reason') or ''})"),
        ("score", f"{f.pct(r.get('score'))} (recall {f.pct(r.get('recall'))}, precision {f.pct(r.get('precision'))}, "
                  f"grader v{r.get('grader_version') or '–'})"),
        ("coverage", f"{f.pct(r.get('coverage'))} (root {f.pct(r.get('root_coverage'))}, subagents "
                     f"{f.pct(r.get('subagent_coverage'))})"),
        ("tokens", f"root {r.get('root_tokens') or 0:,}, subagents {r.get('subagent_tokens') or 0:,} "
                   f"in {r['n_subcalls']:,} calls over {r['n_turns']} turns, {r['wall_s']:.1f} s"),
        ("cost", "–" if cost is None else f"{cost:.4f} USD (root {r['root_cost_usd']:.4f}, subagents "
                 f"{r['subagent_cost_usd']:.4f}); 0 means unpriced or embedded models"),
    ]  # fmt: skip
    return "<table>" + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in items) + "</table>"


def sidecar_name(trajectory_id: str, k: int | str) -> str:
    return f"{trajectory_id}.calls-{k}.js"


def _write_sidecars(view: TraceView, out_dir: Path) -> None:
    chunks: dict[int, dict[int, dict]] = {}
    for batches in view.batches.values():
        for b in batches:
            for c in b.calls:
                i = c["call_index"]
                chunks.setdefault(i // CHUNK, {})[i] = {
                    "p": c["prompt"], "r": c["response"], "e": c["error"], "d": c["depth"],
                    "t": [c["prompt_tokens"], c["completion_tokens"], c["latency_s"]],
                }  # fmt: skip
    tid = view.row["trajectory_id"]
    for k, calls in chunks.items():
        body = orjson.dumps({str(i): v for i, v in calls.items()}).decode()
        (out_dir / sidecar_name(tid, k)).write_text(
            f"(window.RLM_CALLS = window.RLM_CALLS || {{}})[{k}] = {body};\n"
        )


def write_page(view: TraceView, marked: MarkedMemo | None, out_dir: Path, label: str, back: str = "") -> Path:
    """Write ``<out_dir>/<trajectory_id>.html`` and its sidecar scripts; returns the page's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tid = view.row["trajectory_id"]
    _write_sidecars(view, out_dir)
    config = {"sidecar": sidecar_name(tid, "{k}"), "chunk": CHUNK, "cut": CUT_CHARS}
    turns = "".join(_turn(t, view.batches.get(t["turn_index"], [])) for t in view.turns) or "<p>No turns.</p>"
    nav = (
        f'<p><a href="{e(back)}">← report</a> · <a href="index.html">all trajectories</a></p>' if back else ""
    )
    css = (ASSETS / "trace.css").read_text() + _FORMATTER.get_style_defs(".highlight")
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Trajectory {e(tid)}</title><style>{css}</style></head><body>
{nav}<h1>Trajectory {e(tid)}</h1>
{_decision(view)}
{_facts(view, label)}
<h2>Coverage by folder</h2>{_coverage(view.coverage)}
<h2>Memo, marked with the reference judge's verdicts</h2>
<p class="legend">Green: a criterion passed in this unit · orange: the closest unit of a failed criterion, with what it
lacks · red: a false claim or a flagged decoy · purple: text copied from the room, which satisfies nothing.
Units are numbered as the judge numbered them.</p>
{_memo(marked, view)}
<h2>Criteria</h2><div class="lazy">{_criteria(view.grades)}</div>
<h2>Root turns and subagent calls</h2>{turns}
<script type="application/json" id="page-config">{json.dumps(config)}</script>
<script>{(ASSETS / "trace.js").read_text()}</script>
</body></html>
"""
    path = out_dir / page_name(tid)
    path.write_text(page)
    return path
