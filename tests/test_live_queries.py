"""Querying the warehouse while commands run, with real processes and a real DuckDB file.

A writer process holds the file; analysts' queries reach it through its
query server (pipeline.query_server) and never take the lock; an idle shell
holds no lock; a stage waits for a reader that holds the file and, when it
cannot get it in time, exits naming the holder with nothing written.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import requests

from pipeline import db
from pipeline.cli import main
from pipeline.query_client import QueryError, query, read_advert
from pipeline.query_server import advert_path, serve_readers

ROOT = Path(__file__).resolve().parents[1]

# A writer that serves readers, as every stage command does (pipeline.cli), inserting a row every 50 ms.
WRITER = textwrap.dedent(
    """
    import sys, time
    from pipeline import db
    from pipeline.query_server import serve_readers
    path, n = sys.argv[1], int(sys.argv[2])
    with serve_readers(path, command="test writer"):
        con = db.connect(path)
        print("ready", flush=True)
        for i in range(n):
            con.execute(
                "insert into stage_runs (run_id, stage, config_hash, started_at, status) "
                "values (?, 'w', 'h', now(), 'ok')", [f"w{i}"])
            time.sleep(0.05)
        con.close()
    """
)

# Holds the file without serving: read-only (as a reader that opened it directly) or read-write.
HOLDER = textwrap.dedent(
    """
    import sys, time, duckdb
    con = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == "ro")
    print("ready", flush=True)
    time.sleep(float(sys.argv[3]))
    """
)


def _start(code: str, *args: str) -> subprocess.Popen:
    p = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout.readline().strip() == "ready", p.stderr.read()
    return p


@pytest.fixture
def warehouse(tmp_path) -> Path:
    path = tmp_path / "pipeline.duckdb"
    db.connect(path).close()
    return path


def _count(path: Path) -> int:
    return query(path, "select count(*) as n from stage_runs where stage = 'w'").column("n")[0].as_py()


def test_queries_answer_while_a_writer_holds_the_file(warehouse):
    writer = _start(WRITER, str(warehouse), "60")
    counts = []
    while writer.poll() is None:
        counts.append(_count(warehouse))
    assert writer.wait() == 0, writer.stderr.read()
    assert len(counts) >= 5, "the queries did not answer while the writer ran"
    assert counts == sorted(counts), "a later query saw fewer committed rows"
    assert counts[0] < 60 and 0 < counts[-1] <= 60
    assert not advert_path(warehouse).exists(), "the advertisement outlived its server"
    assert _count(warehouse) == 60  # afterwards: straight from the file


# A writer that ends while an analyst's query still runs in its query server.
ENDS_DURING_A_QUERY = textwrap.dedent(
    """
    import sys, time, requests
    from pipeline.query_server import serve_readers
    path = sys.argv[1]
    with serve_readers(path, command="test writer", grace_s=0.5) as advert:
        print("ready", flush=True)
        health = f"http://{advert['host']}:{advert['port']}/health"
        deadline = time.monotonic() + 60
        while requests.get(health, timeout=5).json()["queries"] == 0:  # until the test's query runs
            assert time.monotonic() < deadline, "the query never reached the server"
            time.sleep(0.05)
    """
)


def test_a_command_ending_during_a_query_exits_cleanly(warehouse):
    """Before, the query's thread was a daemon still inside DuckDB at interpreter exit: the command died
    with SIGABRT ("PyGILState_Release ... finalizing") after its work was done."""
    writer = _start(ENDS_DURING_A_QUERY, str(warehouse))
    outcome: list[object] = []

    def slow_query() -> None:
        try:
            outcome.append(
                query(warehouse, "select count(*) as n from range(100000000000) t where t.range % 7 = 3")
            )
        except QueryError as exc:
            outcome.append(exc)

    asking = threading.Thread(target=slow_query)
    asking.start()
    # The writer's block ends once the query runs in its server.
    assert writer.wait(timeout=90) == 0, writer.stderr.read()
    asking.join(timeout=60)
    # The query outlived its grace: interrupted, and its client told so in one line.
    assert len(outcome) == 1 and isinstance(outcome[0], QueryError), outcome
    assert "interrupt" in str(outcome[0]).lower(), outcome[0]


@pytest.mark.slow
def test_the_sql_command_answers_during_a_run_and_refuses_writes(warehouse):
    writer = _start(WRITER, str(warehouse), "200")
    try:
        run = ["--recipe", "tiny", f"run.dir={warehouse.parent}"]
        ask = [sys.executable, "-m", "pipeline", *run, "sql"]
        r = subprocess.run(
            [*ask, "select count(*) from stage_runs"], cwd=ROOT, capture_output=True, text=True
        )
        assert r.returncode == 0, r.stderr
        assert "count_star()" in r.stdout
        r = subprocess.run([*ask, "delete from stage_runs"], cwd=ROOT, capture_output=True, text=True)
        assert (
            r.returncode == 1 and "DELETE statements are refused" in r.stderr and "Traceback" not in r.stderr
        )
        r = subprocess.run(
            [*ask, "--write", "delete from stage_runs", "run.lock_timeout_s=0.5"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        assert r.returncode == 1 and "Traceback" not in r.stderr
        assert f"held by PID {writer.pid}" in r.stderr, r.stderr
    finally:
        writer.wait()
    assert _count(warehouse) == 200  # nothing deleted


def test_the_server_refuses_a_wrong_token(warehouse):
    with serve_readers(warehouse, command="t") as advert:
        url = f"http://{advert['host']}:{advert['port']}/query"
        r = requests.post(url, json={"sql": "select 1", "token": "guess"}, timeout=5)
        assert r.status_code == 403
        good = requests.post(url, json={"sql": "select 42 as x", "token": advert["token"]}, timeout=5)
        assert good.status_code == 200
        assert read_advert(warehouse)["port"] == advert["port"]


def test_a_dead_server_falls_back_to_the_file(warehouse):
    # A command killed with SIGKILL leaves its advertisement behind.
    advert_path(warehouse).write_text('{"pid": 1, "host": "127.0.0.1", "port": 9, "token": "x"}')
    assert query(warehouse, "select count(*) as n from stage_runs").column("n")[0].as_py() == 0


def test_a_stage_waits_for_a_reader_that_holds_the_file(warehouse, capsys):
    reader = _start(HOLDER, str(warehouse), "ro", "1.5")
    t0 = time.monotonic()
    rc = main(
        ["--recipe", "tiny", "rooms", "generate", f"run.dir={warehouse.parent}", "run.lock_timeout_s=60"]
    )
    assert rc == 0
    assert time.monotonic() - t0 >= 1.0, "the stage did not have to wait: the reader held nothing"
    reader.wait()
    con = db.connect(warehouse)
    assert con.execute("select count(*) from rooms").fetchone()[0] == 3
    con.close()


def test_a_stage_that_cannot_get_the_lock_names_the_holder_and_writes_nothing(warehouse, capsys):
    holder = _start(HOLDER, str(warehouse), "rw", "30")
    try:
        rc = main(
            ["--recipe", "tiny", "rooms", "generate", f"run.dir={warehouse.parent}", "run.lock_timeout_s=1"]
        )
        err = capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()
    assert rc == 1
    assert f"held by PID {holder.pid}" in err and "run.lock_timeout_s" in err
    assert len(err.strip().splitlines()) == 1
    con = db.connect(warehouse)
    assert con.execute("select count(*) from rooms").fetchone()[0] == 0
    assert con.execute("select count(*) from stage_runs").fetchone()[0] == 0
    con.close()


class Shell:
    """`python -m pipeline sql --shell` in a real process, fed statements one at a time."""

    def __init__(self, run_dir: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pipeline", "--recipe", "tiny", "sql", "--shell", f"run.dir={run_dir}"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def ask(self, statement: str, expect: str, timeout_s: float = 60) -> str:
        start = len(self.lines)
        self.proc.stdin.write(statement + "\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            out = "".join(self.lines[start:])
            if expect in out:
                return out
            if "error:" in out:
                raise AssertionError(out)
            time.sleep(0.05)
        raise AssertionError(f"no answer to {statement!r} in {timeout_s} s: {''.join(self.lines[start:])!r}")

    def ask_int(self, statement: str, column: str, timeout_s: float = 60) -> int:
        """The single integer a one-row, one-column statement printed (its column named ``column``)."""
        out = self.ask(statement, column, timeout_s)
        values = re.findall(r"│\s*(-?\d+)\s*│", out)
        assert values, out
        return int(values[-1])

    def close(self) -> int:
        self.proc.stdin.write(".quit\n")
        self.proc.stdin.flush()
        return self.proc.wait(timeout=30)


@pytest.mark.slow
def test_an_idle_shell_holds_no_lock(warehouse):
    shell = Shell(warehouse.parent)
    try:
        shell.ask("select 'first' as answer;", "first")
        # While the shell sits idle, a writer without a server gets the file at once...
        con = db.connect(warehouse, lock_timeout_s=2)
        con.execute(
            "insert into stage_runs (run_id, stage, config_hash, started_at, status) values ('x', 'w', 'h', now(), 'ok')"
        )
        # ...and a statement typed meanwhile waits for it instead of failing.
        threading.Timer(1.0, con.close).start()
        assert shell.ask_int("select count(*) as written from stage_runs where stage = 'w';", "written") == 1
    finally:
        assert shell.close() == 0


def test_query_errors_are_one_line(warehouse):
    with pytest.raises(QueryError, match="no_such_table"):
        query(warehouse, "select * from no_such_table")
    with serve_readers(warehouse, command="t"), pytest.raises(QueryError, match="no_such_table"):
        query(warehouse, "select * from no_such_table")


@pytest.mark.slow
def test_queries_answer_while_the_sample_stage_runs(tmp_path, smollm2_path):
    run = tmp_path / "run"
    path = run / "pipeline.duckdb"
    assert main(["--recipe", "tiny", "rooms", "generate", f"run.dir={run}"]) == 0
    stage = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "--recipe", "tiny", "sample", f"run.dir={run}", "sample.k=1"]
        # one short root turn per trajectory on the zero-shot prompt (half the worked example's tokens):
        # the stage only has to run while queries arrive
        + ["harness.max_turns=1", "sampling.max_new_tokens=64", "harness.prompt=base"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    counts, answered_by_server = [], 0
    count_sql = "select count(*) as n from trajectories"
    while stage.poll() is None:
        answered_by_server += read_advert(path) is not None
        counts.append(query(path, count_sql).column("n")[0].as_py())
        time.sleep(0.2)
    assert stage.wait() == 0, stage.stderr.read()[-3000:]
    assert answered_by_server > 0 and len(counts) > 10
    assert counts == sorted(counts), "a later query saw fewer trajectories"
    con = db.connect(path)
    per_pair = con.execute(
        "select room_id, policy_id, count(*) from trajectories group by all order by all"
    ).fetchall()
    con.close()
    assert per_pair and all(n == 1 for _, _, n in per_pair), per_pair
    assert counts[-1] <= len(per_pair) == query(path, count_sql).column("n")[0].as_py()
