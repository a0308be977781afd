"""The grade stage end to end: a real HTTP judge server whose answers are never valid JSON."""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pipeline import db
from pipeline.config import load_config
from pipeline.grading.reference import GRADER_VERSION
from pipeline.harness.trace import Trace, Turn
from pipeline.rooms import store
from pipeline.trace_store import TraceWriter, trajectory_id
from stages import grade, rooms


class _NotJson(BaseHTTPRequestHandler):
    requests = 0

    def do_POST(self):  # noqa: N802 - the http.server hook name
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).requests += 1
        body = {
            "id": "x",
            "object": "chat.completion",
            "model": "judge-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "Sure! Everything passes, I think."},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        raw = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args):
        pass


@pytest.fixture
def judge_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotJson)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_invalid_json_judge_leaves_ungraded_rows_that_never_count(tmp_path, judge_url):
    base = [f"run.dir={tmp_path}", "rooms.n_rooms=1", "rooms.heldout_fraction=0.0"]
    rooms.run(load_config("tiny", base))
    con = db.connect(tmp_path / "pipeline.duckdb")
    room = store.load_room(con, store.room_names(con)[0])
    trace = Trace(
        trajectory_id("p1", room.room_id, "train", 0),
        room.name,
        "p1",
        status="submitted",
        memo="No material issues.",
        started_at="2026-12-01T00:00:00",
    )
    trace.turns = [
        Turn(0, [{"role": "user", "content": "task"}], "```python\nsubmit('x')\n```", "submit('x')")
    ]
    w = TraceWriter(con)
    w.add_trace(trace, room_id=room.room_id, policy_id="p1", sample_index=0, purpose="train")
    w.flush()
    con.close()

    cfg = load_config(
        "tiny",
        [
            *base,
            "grade.judges=[reference,llm]",
            "grade.max_attempts=2",
            "models.judge.kind=openai",
            "models.judge.model=judge-model",
            f"models.judge.base_url={judge_url}",
            "models.judge.max_retries=0",
        ],
    )
    counts = grade.run(cfg)
    assert counts["graded_reference"] == 1 and counts["graded_llm"] == 1
    assert _NotJson.requests >= 2  # the invalid answer was retried
    con = db.connect(tmp_path / "pipeline.duckdb")
    n_criteria = len(room.criteria)
    llm = con.execute(
        "select count(*), count(passed) from grades where judge = 'llm:judge-model'"
    ).fetchall()[0]
    assert llm == (n_criteria, 0)  # one row per criterion, every one ungraded (NULL), none pass or fail
    ref = con.execute("select count(*), count(passed) from grades where judge = 'reference'").fetchall()[0]
    assert ref == (n_criteria, n_criteria)
    # each grade carries its criterion's kind and trap flag
    copied = con.execute(
        "select count(*) from grades g join criteria c using (criterion_id) "
        "where c.room_id = ? and g.kind = c.kind and g.is_trap = c.is_trap",
        [room.room_id],
    ).fetchall()[0][0]
    assert copied == 2 * n_criteria
    # scores read the reference judge only; the NULL verdicts change nothing
    n = con.execute("select n_criteria from trajectory_scores").fetchall()[0][0]
    assert n == n_criteria
    # a rerun finds nothing left to grade: ungraded rows are recorded, not retried forever
    assert grade.run(cfg)["graded_llm"] == 0


def _one_trajectory(tmp_path, memo: str, index: int = 0) -> tuple[list[str], str]:
    """A tiny-recipe warehouse (created on first use) with one submitted trajectory holding ``memo``."""
    base = [f"run.dir={tmp_path}", "rooms.n_rooms=1", "rooms.heldout_fraction=0.0"]
    if not (tmp_path / "pipeline.duckdb").exists():
        rooms.run(load_config("tiny", base))
    con = db.connect(tmp_path / "pipeline.duckdb")
    room = store.load_room(con, store.room_names(con)[0])
    tid = trajectory_id("p1", room.room_id, "train", index)
    trace = Trace(tid, room.name, "p1", status="submitted", memo=memo, started_at="2026-12-01T00:00:00")
    trace.turns = [Turn(0, [{"role": "user", "content": "task"}], "```python\nsubmit(m)\n```", "submit(m)")]
    w = TraceWriter(con)
    w.add_trace(trace, room_id=room.room_id, policy_id="p1", sample_index=index, purpose="train")
    w.flush()
    con.close()
    return base, tid


def test_regrade_keeps_old_versions_and_views_read_the_newest(tmp_path):
    from pipeline.cli import main
    from pipeline.grading.known_answers import evidence_memo

    con_path = tmp_path / "pipeline.duckdb"
    base, _ = _one_trajectory(tmp_path, "placeholder")
    con = db.connect(con_path)
    room = store.load_room(con, store.room_names(con)[0])
    con.execute("update trajectories set memo = ?", [evidence_memo(room)])
    # grades written by grader version 1: every criterion failed, no memo_scores row
    db.write_rows(
        con,
        "grades",
        [
            {"trajectory_id": tid, "criterion_id": c.criterion_id, "judge": "reference", "passed": False,
             "reason": "v1", "graded_at": db.now(), "kind": c.kind, "is_trap": c.is_trap, "grader_version": 1}
            for (tid,) in con.execute("select trajectory_id from trajectories").fetchall()
            for c in room.criteria
        ],
    )  # fmt: skip
    con.close()
    assert grade.run(load_config("tiny", base))["graded_reference"] == 0  # graded already, by v1
    con = db.connect(con_path)
    assert con.execute("select graded, score from trajectory_scores").fetchall() == [(False, None)]
    con.close()

    assert main(["--recipe", "tiny", "grade", "--regrade", *base]) == 0
    con = db.connect(con_path)
    by_version = dict(
        con.execute("select grader_version, count(*) from grades group by 1 order by 1").fetchall()
    )
    assert by_version == {1: len(room.criteria), GRADER_VERSION: len(room.criteria)}  # the old rows stay
    score, version, criteria_rate = con.execute(
        "select score, grader_version, criteria_pass_rate from trajectory_scores"
    ).fetchone()
    assert (score, version) == (
        1.0,
        GRADER_VERSION,
    ) and criteria_rate == 1.0  # the oracle, current grader only
    kinds = dict(con.execute("select kind, pass_rate from pass_rate_by_kind").fetchall())
    assert kinds and all(v == 1.0 for v in kinds.values())  # v1's failures are not mixed in
    assert con.execute("select grader_versions from policy_summary").fetchone()[0] == str(GRADER_VERSION)
    con.close()
    # nothing left: a second regrade grades nothing
    assert grade.run(load_config("tiny", [*base, "grade.regrade=true"]))["graded_reference"] == 0


def test_llm_judge_reads_the_memo_as_the_reference_judge_does(tmp_path):
    """A gullible scripted judge passes everything it is shown; pasted source never reaches it."""
    from pipeline.grading.known_answers import known_memos
    from tests.doubles import SCRIPTS

    shown: list[str] = []

    def gullible(messages):
        user = messages[-1]["content"]
        memo = user.split("<<<\n", 1)[1].split("\n>>>", 1)[0]
        shown.append(memo)
        n = int(re.search(r'keys "1" to "(\d+)"', user).group(1))
        # a pass names a sentence of the memo it was shown (judge version 3): the first will do
        return json.dumps({str(i): int(bool(memo.strip())) for i in range(1, n + 1)})

    SCRIPTS["gullible-judge"] = gullible
    base, _ = _one_trajectory(tmp_path, "placeholder")
    con = db.connect(tmp_path / "pipeline.duckdb")
    room = store.load_room(con, store.room_names(con)[0])
    con.close()
    memos = known_memos(room)
    names = ["dump", "oracle", "claim_all", "empty"]
    con = db.connect(tmp_path / "pipeline.duckdb")
    con.execute("delete from trajectories")
    con.close()
    tids = {name: _one_trajectory(tmp_path, memos[name], index=i)[1] for i, name in enumerate(names)}
    cfg = load_config(
        "tiny",
        [
            *base,
            "grade.judges=[reference,llm]",
            "models.judge.kind=tests.doubles:make_scripted",
            "models.judge.model=gullible-judge",
        ],
    )
    counts = grade.run(cfg)
    assert counts["graded_llm"] == len(names)
    assert not any(room.documents[0].text[:200] in m for m in shown)  # no pasted document reached the judge
    con = db.connect(tmp_path / "pipeline.duckdb")
    llm = {
        tid: (recall, headline)
        for tid, recall, headline in con.execute(
            "select trajectory_id, recall, headline from memo_scores where judge = 'llm:gullible-judge'"
        ).fetchall()
    }
    precision = dict(
        con.execute(
            "select trajectory_id, precision from memo_scores where judge = 'llm:gullible-judge'"
        ).fetchall()
    )
    con.close()
    assert llm[tids["dump"]] == (0.0, 0.0)  # shown nothing, so nothing passes
    assert llm[tids["empty"]] == (0.0, 0.0)
    assert llm[tids["oracle"]][1] == 1.0
    # the judge passes every criterion of claim_all, but its claims are false: precision (at most a tenth
    # above chance) sinks the headline to 2p / (1 + p)
    assert llm[tids["claim_all"]][0] == 1.0 and precision[tids["claim_all"]] < 0.1
    assert llm[tids["claim_all"]][1] < 0.2
