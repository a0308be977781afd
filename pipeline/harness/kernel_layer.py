"""The kernel boundary under the REPL worker: bubblewrap namespaces and a seccomp filter.

The worker's Python-level sandbox (audit hook, import allow-list, rlimits;
see worker.py) is only memory once a bug in CPython's C code is exploited.
Beneath it, on Linux:

- ``bwrap``: the worker starts inside bubblewrap with new user, PID, IPC,
  UTS, network and cgroup namespaces (no network interface at all), the
  Python install, the worker's two files and the exported room bound
  read-only, an empty tmpfs as its working directory (the only writable
  place), ``--die-with-parent`` and a new session. Nothing else of the
  host's filesystem exists inside.
- ``seccomp``: before any model code runs the worker builds and loads a
  filter with libseccomp's own Python binding (worker.load_seccomp): no
  process creation (fork, vfork, clone without CLONE_THREAD, execve), no
  ptrace, mount, namespace, module or keyring calls, no new sockets, no file
  opens for writing and no filesystem changes, and signals only to itself.
  The kernel enforces it for the rest of the process's life (libseccomp
  sets no_new_privs first).

Levels, strongest first: ``bwrap+seccomp``, ``seccomp``, ``python``. The
sandbox runs at the strongest level this machine allows (probed once per
process: user namespaces can be refused in containers, seccomp can be
missing) unless told otherwise, records the level in every trajectory, and
refuses to start below ``harness.min_sandbox_level``.
"""

from __future__ import annotations

import functools
import importlib.machinery
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

LEVELS = ("python", "seccomp", "bwrap+seccomp")  # weakest first
HARNESS_DIR = Path(__file__).resolve().parent
# The interpreter itself, not a virtual environment's link to it: the worker runs with -I -S and
# needs only the standard library, and inside bubblewrap only the real install is bound.
PYTHON = os.path.realpath(sys.executable)


class KernelLayerError(RuntimeError):
    """The sandbox cannot run at the level a recipe requires."""

    user_facing = True


def rank(level: str) -> int:
    if level not in LEVELS:
        raise ValueError(f"unknown sandbox level {level!r} (one of {', '.join(LEVELS)})")
    return LEVELS.index(level)


# libseccomp's own Python binding (Debian: python3-seccomp), a C extension: the worker loads it by
# path (it runs with -S) and never needs ctypes, whose extension module a cell could reach afterwards.
SECCOMP_DIRS = ("/usr/lib/python3/dist-packages", "/usr/lib64/python3/site-packages")


@functools.cache
def seccomp_module_path() -> str | None:
    """The `seccomp` extension built for this interpreter, or None."""
    names = [f"seccomp{suffix}" for suffix in importlib.machinery.EXTENSION_SUFFIXES]
    for folder in [*SECCOMP_DIRS, *sys.path]:
        for name in names:
            path = Path(folder or ".") / name
            if path.is_file():
                return str(path.resolve())
    return None


SECCOMP_PROBE = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("seccomp", sys.argv[1])
sc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sc)
f = sc.SyscallFilter(sc.ALLOW)
f.add_rule(sc.ERRNO(1), "ptrace")
f.load()
"""


@functools.cache
def seccomp_available() -> bool:
    """libseccomp's binding loads in a worker-like interpreter and the kernel takes the filter."""
    path = seccomp_module_path()
    if not sys.platform.startswith("linux") or path is None:
        return False
    try:
        r = subprocess.run(
            [PYTHON, "-I", "-S", "-c", SECCOMP_PROBE, path], capture_output=True, timeout=30, env={}
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


@functools.cache
def bwrap_available() -> bool:
    """bubblewrap is installed and may create the namespaces (some containers refuse user namespaces)."""
    if shutil.which("bwrap") is None:
        return False
    with tempfile.TemporaryDirectory(prefix="rlm-bwrap-probe-") as tmp:
        (Path(tmp) / "room").mkdir()
        argv = bwrap_argv(Path(tmp) / "room", Path(tmp) / "work") + [PYTHON, "-I", "-S", "-c", "pass"]
        try:
            r = subprocess.run(argv, capture_output=True, timeout=30, env={})
        except (OSError, subprocess.TimeoutExpired):
            return False
    return r.returncode == 0


def strongest_level() -> str:
    if seccomp_available():
        return "bwrap+seccomp" if bwrap_available() else "seccomp"
    return "python"


def available_levels() -> tuple[str, ...]:
    """Every level this machine can run, weakest first (tests and benchmarks run each)."""
    return LEVELS[: rank(strongest_level()) + 1]


def resolve_level(requested: str, minimum: str = "python") -> str:
    """The level a worker starts at: ``auto`` is the strongest available; below ``minimum`` is an error."""
    available = strongest_level()
    level = available if requested == "auto" else requested
    rank(level)
    if rank(level) > rank(available):
        raise KernelLayerError(
            f"harness.sandbox_level: {level!r} is not available on this machine (the strongest here is "
            f"{available!r}; bwrap needs the bubblewrap package and user namespaces, seccomp needs libseccomp)"
        )
    if rank(level) < rank(minimum):
        raise KernelLayerError(
            f"harness.min_sandbox_level is {minimum!r} but the sandbox would run at {level!r} "
            f"(the strongest available here is {available!r})"
        )
    return level


def _system_binds() -> list[str]:
    """Read-only /usr, and the merged-/usr links (or directories) beside it."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    return args


def bwrap_argv(room_dir: Path, workdir: Path) -> list[str]:
    """The bubblewrap command that precedes the worker's own command line."""
    args = [
        "bwrap",
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-net",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        *_system_binds(),
    ]
    prefix = Path(sys.base_prefix).resolve()
    if not str(prefix).startswith("/usr/"):
        args += ["--ro-bind", str(prefix), str(prefix)]
    args += [
        "--ro-bind", str(HARNESS_DIR), str(HARNESS_DIR),
        "--ro-bind", str(room_dir), str(room_dir),
        "--proc", "/proc",
        "--dev", "/dev",
        "--tmpfs", str(workdir),
        "--chdir", str(workdir),
        "--clearenv",
    ]  # fmt: skip
    return args
