"""`pipeline serve`'s process lifecycle, with a stand-in for vLLM: a script that answers
/health on the port it is given. The real-server tests are in test_vllm.py; this one checks
that a SIGTERM to the command (a scheduler stopping it, `kill`) stops the server it started.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipeline.serving import healthy
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]

STAND_IN = """\
#!{python}
import http.server, os, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
open({pid_file!r}, "w").write(str(os.getpid()))

class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass

http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still has a pid; it is gone for every purpose here.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


def _stand_in_recipe(tmp_path: Path) -> tuple[int, Path, list[str]]:
    """A free port, the file the stand-in writes its pid to, and the tiny recipe's overrides that serve
    its root from the stand-in on that port."""
    port, pid_file = free_port(), tmp_path / "server.pid"
    stand_in = tmp_path / "python"
    stand_in.write_text(STAND_IN.format(python=sys.executable, pid_file=str(pid_file)))
    stand_in.chmod(0o755)
    overrides = [
        f"run.dir={tmp_path / 'run'}",
        "models.root.kind=openai",
        "models.root.model=smollm2",
        f"models.root.base_url=http://127.0.0.1:{port}/v1",
        f"serve.python={stand_in}",
        f"serve.models={{smollm2: {tmp_path}}}",
        "serve.start_timeout_s=60",
    ]
    return port, pid_file, overrides


@pytest.mark.slow
def test_sigterm_to_serve_stops_the_server_it_started(tmp_path):
    port, pid_file, overrides = _stand_in_recipe(tmp_path)
    argv = [sys.executable, "-m", "pipeline", "--recipe", "tiny", "serve", *overrides]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("ready"):
                break
        assert lines and lines[-1].startswith("ready"), "".join(lines)
        server_pid = int(pid_file.read_text())
        assert healthy(port) and _alive(server_pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 30
        while _alive(server_pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(server_pid), textwrap.shorten(proc.stdout.read(), 500)
        assert not healthy(port)
    finally:
        if proc.poll() is None:
            proc.kill()
        if pid_file.exists() and _alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)  # never leave a server behind


@pytest.mark.slow
def test_a_new_session_restarts_the_servers_this_command_started_and_only_those(tmp_path):
    """new_session stops the started server and starts another process on the same port under a new
    session id; the servers stop when running_servers ends; a command that found its port answering, or
    a config the server does not serve, restarts nothing."""
    from pipeline import serving
    from pipeline.config import load_config

    port, pid_file, overrides = _stand_in_recipe(tmp_path)
    cfg = load_config("tiny", [*overrides, "serve.manage=true"])
    assert serving.current_session() is None and serving.new_session(cfg) is None  # nothing started
    pids = []
    try:
        with serving.running_servers(cfg):
            first = serving.current_session()
            pids.append(int(pid_file.read_text()))
            with serving.running_servers(cfg):  # the port answers: used as it is, nothing started
                assert serving.current_session() == first
                assert serving.new_session(cfg) is None  # this "command" started nothing: nothing restarts
            assert _alive(pids[0]) and healthy(port)  # the inner block did not stop it
            assert (
                serving.new_session(load_config("tiny", [f"run.dir={tmp_path / 'run'}"])) is None
            )  # not its model
            second = serving.new_session(cfg)
            pids.append(int(pid_file.read_text()))
            assert second not in (None, first) and serving.current_session() == second
            assert pids[1] != pids[0] and not _alive(pids[0]) and healthy(port)
        assert serving.current_session() is None and not _alive(pids[1]) and not healthy(port)
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
