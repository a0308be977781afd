"""The kernel layer under the REPL worker, proved on its own.

A test-only switch (SandboxLimits.python_layer=False) starts the worker
without its audit hook, import allow-list and descriptor rlimits; escape
programs must still be stopped by bubblewrap and seccomp alone. The same
programs at the "python" level without the Python layer get through, which
shows the switch really removes it. The normal hostile suite
(test_hostile.py) runs at every level this machine offers.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from pipeline.harness import kernel_layer
from pipeline.harness.room_export import export_room
from pipeline.harness.sandbox import Sandbox, SandboxError, SandboxLimits
from pipeline.rooms.model import Document, Room

KERNEL_LEVELS = [lv for lv in kernel_layer.available_levels() if lv != "python"]


@pytest.fixture(scope="module")
def room_dir(tmp_path_factory) -> Path:
    room = Room(
        name="kernel_room",
        target={"name": "Target Co"},
        deal={"type": "asset purchase"},
        documents=[Document("01_corporate/charter.txt", "corporate", "Charter", "Target Co charter.")],
    )
    return export_room(room, tmp_path_factory.mktemp("room") / "kernel_room")


@pytest.fixture
def host(tmp_path):
    """Things on the host a cell must not reach: a secret file, a TCP listener, a process."""
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    accepted: list[object] = []

    def accept() -> None:
        try:
            accepted.append(listener.accept())
        except OSError:
            pass

    threading.Thread(target=accept, daemon=True).start()
    victim = subprocess.Popen(["sleep", "60"])
    yield {
        "secret": secret,
        "outside": tmp_path / "written-by-the-worker.txt",
        "port": listener.getsockname()[1],
        "accepted": accepted,
        "victim": victim,
    }
    listener.close()
    victim.kill()
    victim.wait()


def escapes(host: dict, room_dir: Path) -> dict[str, str]:
    """Each escape program, as model code with the real os, socket and open in reach."""
    return {
        "write_outside": f"open({str(host['outside'])!r}, 'w').write('x')",
        "write_into_room": f"open({str(room_dir / 'planted.txt')!r}, 'w').write('x')",
        "read_host_file": f"print(open({str(host['secret'])!r}).read())",
        "tcp_connect": f"import socket\nsocket.create_connection(('127.0.0.1', {host['port']}), timeout=2)",
        "fork": "import os\npid = os.fork()\nif pid == 0:\n    os._exit(0)\nprint('forked', pid)",
        "exec_shell": "import os\nos.execv('/bin/sh', ['sh', '-c', 'echo escaped'])",
        "signal_host": f"import os, signal\nos.kill({host['victim'].pid}, signal.SIGTERM)",
    }


def run_cells(room_dir: Path, limits: SandboxLimits, cells: dict[str, str]) -> tuple[str, dict]:
    async def main():
        async with Sandbox(room_dir, limits) as sb:
            out = {}
            for name, code in cells.items():
                out[name] = await sb.run_cell(code)
            return sb.level, out

    return asyncio.run(main())


@pytest.mark.parametrize("level", KERNEL_LEVELS)
def test_escapes_are_stopped_by_the_kernel_layer_alone(level, room_dir, host):
    cells = escapes(host, room_dir)
    if level == "seccomp":
        # Without namespaces the filesystem is the host's: reading is not a seccomp matter
        # (docs/threat-model.md); the Python layer stops it at this level.
        del cells["read_host_file"]
    ran, results = run_cells(room_dir, SandboxLimits(level=level, python_layer=False), cells)
    assert ran == level
    for name, r in results.items():
        assert r.error, f"{name} got through at {level}: {r.output!r}"
        assert not r.reset or name == "exec_shell", (name, r.error)  # nothing crashed the worker
        assert "escaped" not in r.output and "forked" not in r.output and "host secret" not in r.output
    assert "Operation not permitted" in results["fork"].error
    assert "Operation not permitted" in results["exec_shell"].error
    assert not host["outside"].exists() and not (room_dir / "planted.txt").exists()
    assert host["accepted"] == []
    assert host["victim"].poll() is None, "the host's process received the signal"
    if level == "bwrap+seccomp":
        assert "No such file or directory" in results["read_host_file"].error  # not in the namespace


def test_without_either_layer_the_same_programs_get_through(room_dir, host):
    # The control: at the "python" level the switch leaves nothing in the way, so the programs above
    # are real escapes, not programs that fail for some other reason.
    cells = escapes(host, room_dir)
    _, results = run_cells(
        room_dir,
        SandboxLimits(level="python", python_layer=False),
        {k: cells[k] for k in ("read_host_file", "write_outside", "signal_host")},
    )
    assert "host secret" in results["read_host_file"].output
    assert results["write_outside"].error is None and host["outside"].exists()
    assert results["signal_host"].error is None
    host["victim"].wait(timeout=10)
    assert host["victim"].returncode == -signal.SIGTERM


def test_the_worker_runs_at_the_strongest_level_available(room_dir):
    level, results = run_cells(room_dir, SandboxLimits(), {"ok": "print(len(room.documents))"})
    assert level == kernel_layer.strongest_level()
    assert results["ok"].output == "1\n"


def test_a_minimum_level_is_enforced(room_dir, monkeypatch):
    with pytest.raises(SandboxError, match="min_sandbox_level"):
        run_cells(room_dir, SandboxLimits(level="python", min_level="seccomp"), {})
    monkeypatch.setattr(kernel_layer, "strongest_level", lambda: "python")
    with pytest.raises(kernel_layer.KernelLayerError, match="not available on this machine"):
        kernel_layer.resolve_level("bwrap+seccomp")
    with pytest.raises(kernel_layer.KernelLayerError, match="would run at 'python'"):
        kernel_layer.resolve_level("auto", "seccomp")
    assert kernel_layer.resolve_level("auto") == "python"
    with pytest.raises(ValueError, match="unknown sandbox level"):
        kernel_layer.resolve_level("docker")


def test_the_sample_stage_refuses_below_the_minimum(tmp_path, monkeypatch, capsys):
    from pipeline.cli import main

    run = tmp_path / "run"
    assert main(["--recipe", "tiny", "rooms", "generate", f"run.dir={run}"]) == 0
    capsys.readouterr()
    monkeypatch.setattr(kernel_layer, "strongest_level", lambda: "seccomp")
    rc = main(["--recipe", "tiny", "sample", f"run.dir={run}", "harness.min_sandbox_level=bwrap+seccomp"])
    err = capsys.readouterr().err
    assert rc == 1 and "min_sandbox_level" in err and len(err.strip().splitlines()) == 1
    from pipeline import db

    con = db.connect(run / "pipeline.duckdb")
    assert con.execute("select count(*) from trajectories").fetchone()[0] == 0
    con.close()
