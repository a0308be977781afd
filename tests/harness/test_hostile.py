"""Hostile programs against the REPL sandbox: each must be contained, and the REPL must keep working.

Every test runs a program a hostile root might write, checks that the
CellResult reports an error or a limit (and, where the program aims at the
host, that nothing happened there: no file, no connection, no process), then
checks that the next cell in the same Sandbox still answers ``print(1+1)``.

The programs are written so that a *broken* sandbox fails the test without
harming the machine: one fork attempt (never a loop), marker files under
tmp_path, a signal-0 probe rather than a real kill, a listener the test owns.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import socket
from pathlib import Path

import psutil
import pytest

from pipeline.harness import kernel_layer
from pipeline.harness.room_export import export_room
from pipeline.harness.sandbox import CellResult, Sandbox, SandboxLimits
from pipeline.rooms.model import Document, Room

LIMITS = SandboxLimits(cell_timeout_s=1.0, memory_mb=256, output_chars=500, grace_s=1.0)
# The whole suite runs at every kernel level this machine offers (kernel_layer.LEVELS).
AVAILABLE_LEVELS = kernel_layer.available_levels()
_LEVEL = ["auto"]


@pytest.fixture(autouse=True, params=AVAILABLE_LEVELS)
def sandbox_level(request) -> str:
    _LEVEL[0] = request.param
    yield request.param
    _LEVEL[0] = "auto"


def at_level(limits: SandboxLimits) -> SandboxLimits:
    return dataclasses.replace(limits, level=_LEVEL[0])


# Reaches the real os module and the real builtins without importing anything:
# os._wrap_close is a class defined in os, so its __init__.__globals__ is os's namespace.
ESCAPE = """
def _find(name):
    for c in ().__class__.__base__.__subclasses__():
        if c.__name__ == name:
            return c
    raise LookupError(name)
_os = _find("_wrap_close").__init__.__globals__
_bi = _os["__builtins__"]
_sys = _os["sys"]
"""


@pytest.fixture(scope="module")
def room_dir(tmp_path_factory) -> Path:
    room = Room(
        name="hostile_room",
        target={"name": "Target Co"},
        deal={"type": "asset purchase"},
        documents=[
            Document("01_corporate/charter.txt", "corporate", "Charter", "Target Co charter.\n\nArticle 1.")
        ],
    )
    return export_room(room, tmp_path_factory.mktemp("room") / "hostile_room")


async def answer_llm(kind: str, payload: dict):
    if kind == "batch":
        return [f"real:{p}" for p in payload["prompts"]]
    return "real rlm"


def contained(r: CellResult, limit: str | None = "sandbox") -> None:
    assert r.error, f"expected an error, got output {r.output!r}"
    if limit is not None:
        assert r.limit == limit, (r.limit, r.error)


async def still_works(sb: Sandbox) -> None:
    r = await sb.run_cell("print(1+1)")
    assert (r.output, r.error) == ("2\n", None)


def hostile(room_dir: Path, *codes: str, limits: SandboxLimits = LIMITS) -> list[CellResult]:
    """Run the cells in one sandbox, check the REPL still works, and check no worker outlives it."""

    async def main():
        async with Sandbox(room_dir, at_level(limits), answer_llm) as sb:
            results = [await sb.run_cell(c) for c in codes]
            await still_works(sb)
            pids = list(sb.pids)
        return results, pids

    results, pids = asyncio.run(main())
    assert pids and not any(psutil.pid_exists(p) for p in pids)
    return results


# -- files -------------------------------------------------------------------------
def test_read_etc_passwd_every_way(room_dir):
    r = hostile(
        room_dir,
        "print(open('/etc/passwd').read())",
        ESCAPE + "print(_bi['open']('/etc/passwd').read())",
        ESCAPE + "fd = _os['open']('/etc/passwd', 0)\nprint(_os['read'](fd, 100))",
        ESCAPE + "print(_sys.modules['io'].open('/etc/passwd').read())",
        # a file-opening class found by walking object's subclasses
        "seen, todo = set(), [object]\nwhile todo:\n    c = todo.pop()\n    if c not in seen:\n        seen.add(c)\n"
        "        todo.extend(type.__subclasses__(c))\nF = [c for c in seen if c.__name__ == 'FileIO'][0]\n"
        "print(F('/etc/passwd').read())",
        "import pathlib\nprint(pathlib.Path('/etc/passwd').read_text())",
        ESCAPE + "print(_bi['__import__']('pathlib').Path('/etc/passwd').read_text())",
    )
    contained(r[0], limit=None)
    assert "NameError" in r[0].error  # the namespace has no open()
    for x in r[1:5]:
        contained(x)
        assert "open" in x.error
    contained(r[5], limit=None)  # the guarded import refuses pathlib with an ImportError
    contained(r[6])  # the real __import__ cannot load a new module either
    assert all("root:" not in x.output for x in r)


def test_write_files_in_cwd_and_tmp(room_dir, tmp_path):
    marker = tmp_path / "written.txt"

    async def main():
        async with Sandbox(room_dir, at_level(LIMITS)) as sb:
            workdir = sb.workdir
            r = [
                await sb.run_cell(ESCAPE + "_bi['open']('here.txt', 'w').write('x')"),
                await sb.run_cell(ESCAPE + f"_bi['open']({str(marker)!r}, 'w').write('x')"),
                await sb.run_cell(ESCAPE + f"_os['open']({str(marker)!r}, _os['O_CREAT'] | _os['O_WRONLY'])"),
                await sb.run_cell(ESCAPE + f"_os['mkdir']({str(tmp_path / 'newdir')!r})"),
                await sb.run_cell(ESCAPE + "print(_os['listdir']('/'))"),
            ]
            left = list(workdir.iterdir())
            await still_works(sb)
        return r, left

    r, left = asyncio.run(main())
    for x in r:
        contained(x)
    assert left == []
    assert not marker.exists() and not (tmp_path / "newdir").exists()


# -- network and processes ---------------------------------------------------------------
def test_socket_connect_to_a_local_listener(room_dir):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(0.2)
        port = listener.getsockname()[1]
        r = hostile(
            room_dir,
            "import socket",
            ESCAPE + f"s = _bi['__import__']('socket').create_connection(('127.0.0.1', {port}))",
            ESCAPE + "_bi['__import__']('_socket')",
        )
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing connected
    contained(r[0], limit=None)
    contained(r[1])
    contained(r[2])


def test_subprocess_system_exec_spawn(room_dir, tmp_path):
    markers = [tmp_path / f"m{i}" for i in range(4)]
    sh = ["/bin/sh", "-c"]
    r = hostile(
        room_dir,
        "import subprocess",
        ESCAPE + f"_bi['__import__']('subprocess').run(['touch', {str(markers[0])!r}])",
        ESCAPE + f"_os['system']('touch {markers[1]}')",
        ESCAPE + f"_os['posix_spawn']('/bin/sh', {sh + ['touch ' + str(markers[2])]!r}, {{}})",
        ESCAPE + f"_os['execv']('/bin/sh', {sh + ['touch ' + str(markers[3])]!r})",
        ESCAPE + f"_os['popen']('touch {markers[0]}')",
    )
    contained(r[0], limit=None)
    for x in r[1:]:
        contained(x)
    assert not any(m.exists() for m in markers)


def test_fork_once_and_multiprocessing(room_dir):
    # One attempt; if it ever succeeded the child exits at once.
    fork = ESCAPE + "pid = _os['fork']()\nif pid == 0:\n    _os['_exit'](0)\nprint('forked', pid)"
    r = hostile(room_dir, fork, "import multiprocessing", ESCAPE + "_bi['__import__']('multiprocessing')")
    contained(r[0])
    assert "os.fork" in r[0].error and "forked" not in r[0].output
    contained(r[1], limit=None)
    contained(r[2])


def test_signals_to_the_host_and_new_descriptors(room_dir):
    r = hostile(
        room_dir,
        ESCAPE + "_os['kill'](_os['getppid'](), 0)",  # signal 0: a probe, harmless if it got through
        ESCAPE + "_os['close'](0)\nfd = _os['pidfd_open'](_os['getppid']())\nprint('pidfd', fd)",
        ESCAPE + "_sys.modules['resource'].setrlimit(_sys.modules['resource'].RLIMIT_NOFILE, (64, 64))",
    )
    contained(r[0])
    contained(r[1], limit=None)
    if _LEVEL[0] == "python":
        assert "Too many open files" in r[1].error  # RLIMIT_NOFILE=0: no descriptor can be made
    else:
        assert "Operation not permitted" in r[1].error  # the seccomp filter refuses pidfd_open first
    contained(r[2])


# -- resources ------------------------------------------------------------------------
def test_allocate_50_gb(room_dir):
    # Zero-filling 256 MB takes a moment on a busy machine: a roomier time limit.
    limits = SandboxLimits(cell_timeout_s=10.0, memory_mb=256, grace_s=1.0)
    r = hostile(
        room_dir,
        "b = bytearray(50 * 1024**3)",
        "chunks = []\nwhile True:\n    chunks.append(bytearray(10**7))",
        limits=limits,
    )
    contained(r[0], limit="memory")
    contained(r[1], limit="memory")
    assert "256 MB" in r[0].error


def test_infinite_loop(room_dir):
    r = hostile(room_dir, "x = 0\nwhile True:\n    x += 1")
    contained(r[0], limit="timeout")
    assert r[0].error == "TimeoutError: cell exceeded 1.0 s" and not r[0].reset


def test_runaway_regex(room_dir):
    # Catastrophic backtracking runs inside the C regex engine, which polls for signals.
    r = hostile(room_dir, "import re\nprint(re.match(r'(a+)+$', 'a' * 64 + 'b'))")
    contained(r[0], limit="timeout")


def test_deep_recursion(room_dir):
    # Default limit: a RecursionError. Deep C recursion (hashing a million nested tuples, unchecked
    # in CPython 3.11) overflows the C stack: the worker segfaults and is replaced.
    crash = "x = ()\nfor _ in range(10**6):\n    x = (x,)\nprint(hash(x))"
    r = hostile(room_dir, "def f(n):\n    return f(n + 1)\nf(0)", crash)
    contained(r[0], limit=None)
    assert "RecursionError" in r[0].error
    contained(r[1], limit="crash")
    assert r[1].reset and "SIGSEGV" in r[1].error


def test_gigabytes_of_print(room_dir):
    host_rss = psutil.Process().memory_info().rss
    r = hostile(room_dir, "while True:\n    print('x' * 100_000)")
    contained(r[0], limit="timeout")
    assert r[0].output.startswith("x" * 500) and "more characters]" in r[0].output
    assert len(r[0].output) < 600
    assert psutil.Process().memory_info().rss - host_rss < 200 * 1024**2


# -- escapes --------------------------------------------------------------------------
def test_ctypes_and_native_modules(room_dir):
    # Load the real _ctypes extension by hand, past the import machinery.
    origin = importlib.util.find_spec("_ctypes").origin
    load = ESCAPE + (
        "imp = _sys.modules['_imp']\n"
        f"spec = type(_sys.modules['sys'].__spec__)('_ctypes', None, origin={origin!r})\n"
        "print(imp.create_dynamic(spec))"
    )
    r = hostile(room_dir, "import ctypes", ESCAPE + "_bi['__import__']('ctypes')", load)
    contained(r[0], limit=None)
    contained(r[1])
    contained(r[2])
    assert "module" not in r[2].output


def test_code_swapping_and_hook_tampering(room_dir):
    r = hostile(
        room_dir,
        "def a(): return 1\ndef b(): return 2\na.__code__ = b.__code__",
        ESCAPE + "(lambda: 0).__code__.replace(co_consts=(None,))",
        # find the audit hook through the worker module and try to loosen it
        ESCAPE
        + "w = _sys.modules['__main__']\nh = w._make_audit_hook([])\nh.__defaults__ = (frozenset({'open'}),) + h.__defaults__[1:]",
        ESCAPE + "_sys.addaudithook(lambda e, a: None)",
    )
    for x in r:
        contained(x)


def test_monkeypatching_llm_batch_and_overwriting_room(room_dir):
    r = hostile(
        room_dir,
        "llm_batch = lambda prompts: ['fake'] * len(prompts)\nllm_query = None\nroom = 'gone'\ndocuments = []\nprint(llm_batch(['a']))",
        "print(llm_batch(['a']), llm_query('b'), room.name, len(documents))",
        "__builtins__['print'] = None",
        "print('builtins restored')",
    )
    assert r[0].output == "['fake']\n"
    assert r[1].output == "['real:a'] real:b hostile_room 1\n"  # protected names are re-bound each cell
    assert r[3].output == "builtins restored\n"


def test_catching_the_timeout_gets_a_hard_kill_and_reset(room_dir):
    code = "secret = 1\nwhile True:\n    try:\n        while True:\n            secret = secret + 1\n    except BaseException:\n        pass"

    async def main():
        async with Sandbox(room_dir, at_level(LIMITS)) as sb:
            first = sb.pid
            r = await sb.run_cell(code)
            after = await sb.run_cell("print('secret' in globals())")
            return r, after, first, sb.pid

    r, after, first, second = asyncio.run(main())
    contained(r, limit="timeout")
    assert r.reset and "restarted" in r.error
    assert first != second and not psutil.pid_exists(first)
    assert after.output == "False\n"


def test_threads_left_running_get_a_reset(room_dir):
    code = ESCAPE + "_sys.modules['_thread'].start_new_thread(lambda: [0 for _ in iter(int, 1)], ())"
    r = hostile(room_dir, code)
    # As root RLIMIT_NPROC does not apply and the thread starts: the worker is replaced after the cell.
    # As another user the kernel refuses the thread.
    assert r[0].error
    assert (r[0].limit == "sandbox" and r[0].reset) or "can't start new thread" in r[0].error


def test_protocol_garbage_on_the_channel(room_dir):
    code = (
        ESCAPE
        + "for fd in range(3, 256):\n    try:\n        _os['write'](fd, b'\\xff' * 64)\n    except OSError:\n        pass\nx = 0\nwhile True:\n    x += 1"
    )
    r = hostile(room_dir, code)
    contained(r[0], limit="crash")
    assert r[0].reset and "protocol" in r[0].error


def test_other_trajectory_namespace_is_unreachable(room_dir):
    token = "7f3a9c21e4"
    search = (
        ESCAPE
        + """
needle = "TRAJ" + "SECRET-"
found = set()
gc = _sys.modules["gc"]
for o in gc.get_objects():
    if isinstance(o, dict):
        for v in list(o.values()):
            if isinstance(v, str) and v.startswith(needle) and v != needle:
                found.add(v)
for m in list(_sys.modules.values()):
    for v in list(getattr(m, "__dict__", {}).values()):
        if isinstance(v, str) and v.startswith(needle) and v != needle:
            found.add(v)
for v in list(globals().values()):
    if isinstance(v, str) and v.startswith(needle) and v != needle:
        found.add(v)
print(len(found), sorted(found))
"""
    )

    async def main():
        async with Sandbox(room_dir, at_level(LIMITS)) as a, Sandbox(room_dir, at_level(LIMITS)) as b:
            ra = await a.run_cell(f"secret = 'TRAJ' + 'SECRET-' + {token!r}\nprint(len(secret))")
            self_check = await a.run_cell(search)  # the search does find a secret in its own process
            rb = await b.run_cell(search)
            await still_works(b)
            return ra, self_check, rb

    ra, self_check, rb = asyncio.run(main())
    assert ra.output == "21\n"
    assert self_check.output.startswith("1 ") and token in self_check.output
    assert rb.error is None and rb.output == "0 []\n"
