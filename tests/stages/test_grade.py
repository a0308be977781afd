"""The grade stage end to end: a real HTTP judge server whose answers are never valid JSON."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pipeline import db
from pipeline.config import load_config
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
