"""The sandboxed REPL worker: one process, one persistent namespace, one trajectory.

The host (pipeline.harness.sandbox) starts it as
``python -I -S -B .../pipeline/harness/worker.py --fd N`` and talks to it over
the inherited socket N with length-prefixed JSON frames (4-byte big-endian
length, then UTF-8 JSON). It can also be started as
``python -m pipeline.harness.worker --fd N`` for debugging.

Host -> worker: ``init`` (room folder and limits), ``cell`` (code to run),
``llm_result`` (the answer to a request), ``exit``.
Worker -> host: ``ready``, ``llm`` (a request, while a cell blocks on it),
``done`` (the cell's output, error, limit and submitted memo).

Before any model code runs the worker maps the room, pre-imports the
allow-listed modules (afterwards no module can be loaded at all), loads the
seccomp filter when the host asks for one (``init["seccomp"]`` names
libseccomp's binding; see load_seccomp and pipeline.harness.kernel_layer,
which may also have started it inside bubblewrap), sets
rlimits (address space = what is mapped now + the memory limit, no file
writes, no core files, no new file descriptors, no new processes for
non-root users), clears the environment and installs an audit hook that
refuses file opens, imports, os.* / socket / subprocess / ctypes / mmap /
resource / signal events, code-object construction and code swapping.
The hook keeps its state in default arguments (setting ``__defaults__`` is
itself refused) and calls no globals or builtins, so model code that reaches
the worker's globals cannot loosen it. The host does not trust anything this
process says: see docs/threat-model.md for what this stops and what it does not.
"""

from __future__ import annotations

# Everything the worker and the model may use is imported here, before the
# audit hook goes in: afterwards any import that would load a module fails.
import __future__  # noqa: F401  (so `from __future__ import ...` works in cells)

import _strptime  # noqa: F401  (datetime.strptime imports it lazily)
import _thread
import abc  # noqa: F401
import bisect  # noqa: F401
import builtins
import collections
import copy  # noqa: F401
import dataclasses  # noqa: F401
import datetime
import decimal  # noqa: F401
import difflib  # noqa: F401
import enum  # noqa: F401
import errno
import faulthandler
import fractions  # noqa: F401
import functools  # noqa: F401
import gc
import heapq  # noqa: F401
import itertools  # noqa: F401
import json
import linecache
import math  # noqa: F401
import operator  # noqa: F401
import os
import pprint  # noqa: F401
import random  # noqa: F401
import re  # noqa: F401
import signal
import statistics  # noqa: F401
import string  # noqa: F401
import sys
import textwrap  # noqa: F401
import time
import traceback
import types
import typing  # noqa: F401
import unicodedata  # noqa: F401

try:
    import resource
except ImportError:  # not POSIX: no rlimits (the host refuses to run there anyway)
    resource = None  # type: ignore[assignment]

if __package__:
    from .room_view import RoomView
else:  # started by path under -I -S: load the sibling module without importing the package
    import importlib.util

    _spec = importlib.util.spec_from_file_location(
        "room_view", os.path.join(os.path.dirname(__file__), "room_view.py")
    )
    _room_view = importlib.util.module_from_spec(_spec)
    sys.modules["room_view"] = _room_view
    _spec.loader.exec_module(_room_view)
    RoomView = _room_view.RoomView

ALLOWED_MODULES = frozenset(
    "re math json collections itertools functools statistics string textwrap datetime decimal fractions "
    "random heapq bisect operator typing dataclasses difflib unicodedata copy pprint enum abc __future__".split()
)
PROTECTED_NAMES = ("room", "documents", "llm_query", "llm_batch", "llm_batch_async", "rlm_query", "submit")
REMOVED_BUILTINS = ("open", "input", "breakpoint", "exit", "quit", "help", "copyright", "credits", "license")
# Codecs are imported on first use; load the common ones now so .decode("latin-1") works in a cell.
PRELOAD_ENCODINGS = (
    "ascii latin_1 cp1252 utf_8_sig utf_16 utf_16_le utf_16_be utf_32 utf_32_le utf_32_be "
    "unicode_escape raw_unicode_escape idna".split()
)
LIMIT_KINDS = ("timeout", "memory", "output", "sandbox", "crash")
MAX_ERROR_CHARS = 2000
MAX_FRAME_BYTES = 64 * 1024 * 1024  # the host refuses bigger frames (pipeline.harness.sandbox)
# llm_batch sends a batch as large as the room in parts of at most this many bytes and prompts:
# the host holds one part at a time, and answers come back part by part, in order.
BATCH_PART_BYTES = 16 * 1024 * 1024
BATCH_PART_PROMPTS = 4096
MAX_PROMPT_BYTES = MAX_FRAME_BYTES - 1024 * 1024  # one prompt must fit a frame with its envelope
MAX_MEMO_CHARS = 1_000_000
TRACEBACK_FRAMES = 3  # model-code frames kept in a short traceback

# Audit events model code may raise; every other event is refused. An
# allow-list, so an event added by a future CPython is refused by default.
_ALLOWED_EVENTS = frozenset(
    {
        "exec",
        "compile",
        "builtins.id",
        "object.__getattr__",
        "object.__delattr__",
        "object.__setattr__",  # filtered below: code/defaults swaps are refused
        "sys._getframe",  # namedtuple, typing and enum read their caller's module name
        "sys._current_frames",
        "sys._current_exceptions",
        "sys.settrace",
        "sys.setprofile",
        "sys.excepthook",
        "sys.unraisablehook",
        "sys.set_asyncgen_hook_firstiter",
        "sys.set_asyncgen_hook_finalizer",
        "array.__new__",
        "function.__new__",
        "marshal.dumps",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "cpython._PySys_ClearAuditHooks",
    }
)
_GUARDED_ATTRS = frozenset({"__code__", "__defaults__", "__kwdefaults__"})


class SandboxViolation(PermissionError):
    """An operation the sandbox refuses (file, network, process, ctypes, ...)."""


class SandboxImportError(ImportError):
    """An import the sandbox refuses (the module is not allow-listed or not preloaded)."""


class CellTimeout(BaseException):
    """The cell ran past its time limit. A BaseException so `except Exception` does not swallow it."""


class ProtocolError(RuntimeError):
    pass


def _make_audit_hook(log: list[str]):
    """The audit hook. Its state lives in default arguments and it calls no globals or builtins.

    ``log`` collects what was refused during the current cell (capped), so a
    refusal the cell caught and ignored is still reported to the root.
    """

    def hook(
        event,
        args,
        _allowed=_ALLOWED_EVENTS,
        _guarded=_GUARDED_ATTRS,
        _violation=SandboxViolation,
        _import_error=SandboxImportError,
        _str=str,
        _type=type,
        _log=log,
        _log_cap=8,
        _len=len,
    ):
        if event in _allowed:
            if event == "object.__setattr__" and args[1] in _guarded:
                detail = f"setting {args[1]} of a function"
            else:
                return
        elif event == "import":
            name = args[0] if _type(args[0]) is _str else "?"
            if _len(_log) < _log_cap:
                _log.append(f"import of {name!r}")
            raise _import_error(
                f"sandbox: import of {name!r} is not allowed (only preloaded, allow-listed modules)"
            )
        elif event == "open":
            target = args[0] if _type(args[0]) is _str else "a file"
            detail = f"open({target!r})"
        elif event == "sys.addaudithook":
            detail = "adding an audit hook"
        else:
            detail = event
        if _len(_log) < _log_cap:
            _log.append(detail)
        raise _violation(f"sandbox: {detail} is not allowed")

    return hook


class CappedOutput:
    """sys.stdout for a cell: keeps the first ``cap`` characters and only counts the rest."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.parts: list[str] = []
        self.stored = 0
        self.dropped = 0

    def write(self, s) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        n = len(s)
        room_left = self.cap - self.stored
        if room_left > 0:
            piece = s[:room_left]
            self.parts.append(piece)
            self.stored += len(piece)
            self.dropped += n - len(piece)
        else:
            self.dropped += n
        return n

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def getvalue(self) -> str:
        text = _clean("".join(self.parts))
        if self.dropped:
            text += f"\n[... {self.dropped} more characters]"
        return text


def _clean(text: str | None) -> str | None:
    """Replace lone surrogates (which UTF-8 cannot hold) so results can be stored anywhere."""
    if text is None:
        return None
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


class Channel:
    """Length-prefixed JSON frames over one inherited socket descriptor, with blocking os calls."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def _read_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = os.read(self.fd, n - len(buf))
            if not chunk:
                raise EOFError("host closed the channel")
            buf += chunk
        return bytes(buf)

    def recv(self) -> dict:
        n = int.from_bytes(self._read_exact(4), "big")
        msg = json.loads(self._read_exact(n))
        if not isinstance(msg, dict) or not isinstance(msg.get("t"), str):
            raise ProtocolError(f"bad frame from host: {msg!r:.200}")
        return msg

    def send(self, msg: dict) -> None:
        data = json.dumps(msg).encode("ascii")  # ASCII escapes: even lone surrogates travel
        if len(data) > MAX_FRAME_BYTES:
            # Raised before anything is written, so a too-big llm_batch is the cell's error, not a crash.
            raise ValueError(
                f"request of {len(data) / 2**20:.0f} MiB is over the {MAX_FRAME_BYTES >> 20} MiB limit"
            )
        view = memoryview(len(data).to_bytes(4, "big") + data)
        while view:
            view = view[os.write(self.fd, view) :]


class CellClock:
    """The soft per-cell time limit: SIGALRM raises CellTimeout; paused while the host answers an LLM call."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.left = 0.0
        self.armed = False
        signal.signal(signal.SIGALRM, self._on_alarm)

    def _on_alarm(self, signum, frame) -> None:
        if self.armed:
            self.armed = False
            raise CellTimeout()

    def start(self) -> None:
        self.left = self.seconds
        self.resume()

    def resume(self) -> None:
        self.armed = True
        signal.setitimer(signal.ITIMER_REAL, max(self.left, 1e-3))

    def pause(self) -> None:
        left = signal.setitimer(signal.ITIMER_REAL, 0)[0]
        if self.armed:
            # 0 means the timer fired and the signal is pending: keep a sliver so resume re-fires it.
            self.left = left if left > 0 else 1e-3
        self.armed = False

    def stop(self) -> None:
        self.armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)


def _vm_size_bytes() -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


# Refused with EPERM once the seccomp filter is loaded (see pipeline.harness.kernel_layer).
SECCOMP_DENIED = (
    # new processes and programs
    "fork", "vfork", "execve", "execveat",
    # other processes' memory, the kernel, namespaces, mounts
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_open", "pidfd_getfd",
    "pidfd_send_signal", "mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
    "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "bpf",
    "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "personality",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    # the network: the worker's one socket is inherited, already connected
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    # files: nothing is created, renamed, removed, linked or re-permissioned
    "creat", "truncate", "rename", "renameat", "renameat2", "unlink", "unlinkat", "mkdir", "mkdirat",
    "rmdir", "link", "linkat", "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "chown",
    "fchown", "lchown", "fchownat", "mknod", "mknodat", "setxattr", "lsetxattr", "fsetxattr",
    "removexattr", "lremovexattr", "fremovexattr", "utime", "utimes", "utimensat", "futimesat",
    "memfd_create", "name_to_handle_at", "open_by_handle_at",
    # identity
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "setfsuid",
    "setfsgid", "capset", "tkill",
)  # fmt: skip
CLONE_THREAD = 0x00010000  # a new thread of this process; clone without it makes a new process


def load_seccomp(module_path: str) -> None:
    """Build and load this process's seccomp filter with libseccomp's binding (loaded by path).

    Default allow, then EPERM for SECCOMP_DENIED, clone without
    CLONE_THREAD, opens with any write flag, and signals to any process but
    this one; ENOSYS for clone3 and openat2, whose arguments a filter cannot
    inspect, so the C library falls back to clone and openat. The kernel
    keeps the filter for the rest of the process's life.
    """
    spec = importlib.util.spec_from_file_location("seccomp", module_path)
    sc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sc)
    f = sc.SyscallFilter(sc.ALLOW)
    eperm = sc.ERRNO(errno.EPERM)

    def rule(action, name: str, *args) -> None:
        try:
            f.add_rule(action, name, *args)
        except (ValueError, RuntimeError, OSError):
            pass  # a call this architecture does not have (arm64 has no open, fork, ...)

    for name in SECCOMP_DENIED:
        rule(eperm, name)
    rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    rule(sc.ERRNO(errno.ENOSYS), "clone3")
    rule(sc.ERRNO(errno.ENOSYS), "openat2")
    for flag in (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND):
        rule(eperm, "openat", sc.Arg(2, sc.MASKED_EQ, flag, flag))
        rule(eperm, "open", sc.Arg(1, sc.MASKED_EQ, flag, flag))
    pid = os.getpid()
    for name in ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        rule(eperm, name, sc.Arg(0, sc.NE, pid))
    f.load()


def _set_limits(memory_mb: int, python_layer: bool = True) -> dict[str, int]:
    if resource is None:
        return {}
    applied: dict[str, int] = {}

    def setlim(name: str, value: int) -> None:
        kind = getattr(resource, name, None)
        if kind is None:
            return
        try:
            resource.setrlimit(kind, (value, value))
            applied[name] = value
        except (ValueError, OSError):
            pass  # e.g. an inherited hard limit already lower than asked

    vm = _vm_size_bytes()
    if vm is not None and memory_mb > 0:
        # The room is already mapped and counted in VmSize; the limit is on top of that.
        setlim("RLIMIT_AS", vm + memory_mb * 1024 * 1024)
    if not python_layer:
        return applied
    setlim("RLIMIT_FSIZE", 0)
    setlim("RLIMIT_CORE", 0)
    # No new descriptors at all: the channel, stdio and the room mapping are already open.
    # This also closes pidfd/eventfd/memfd routes that have no audit event.
    setlim("RLIMIT_NOFILE", 0)
    if os.getuid() != 0:  # root ignores RLIMIT_NPROC; for others 0 stops fork and threads at the kernel
        setlim("RLIMIT_NPROC", 0)
    return applied


def _prompt_list(prompts, name: str) -> list[str]:
    if isinstance(prompts, str) or not hasattr(prompts, "__iter__"):
        raise TypeError(f"{name}(prompts): expected a list of str")
    prompts = list(prompts)
    for i, p in enumerate(prompts):
        if not isinstance(p, str):
            raise TypeError(f"{name}(prompts): prompts[{i}] is a {type(p).__name__}, expected str")
    return prompts


def _parts(prompts: list[str], out: list[str]):
    """The indices of ``prompts`` in frames' worth of parts; a prompt too big for any frame gets its
    error in ``out`` and goes in none."""
    part: list[int] = []
    size = 0
    for i, p in enumerate(prompts):
        n = len(json.dumps(p)) + 2  # as the frame will carry it (ASCII escapes), plus the separator
        if n > MAX_PROMPT_BYTES:  # this item's error; the rest of the batch still runs
            out[i] = (
                f"ERROR: prompt of {n / 2**20:.0f} MiB is over the {MAX_PROMPT_BYTES >> 20} MiB "
                "limit of one prompt; split it into smaller chunks"
            )
            continue
        if part and (size + n > BATCH_PART_BYTES or len(part) >= BATCH_PART_PROMPTS):
            yield part
            part, size = [], 0
        part.append(i)
        size += n
    if part:
        yield part


def _fill(out: list[str], part: list[int], answers) -> None:
    if (
        not isinstance(answers, list)
        or len(answers) != len(part)
        or not all(isinstance(x, str) for x in answers)
    ):
        raise ProtocolError("bad llm_batch answer from host")
    for i, a in zip(part, answers, strict=True):
        out[i] = a


class Pending:
    """The answers of ``llm_batch_async``, still coming: the subagents read while the REPL goes on."""

    def __init__(self, worker: Worker, started: list[tuple[int, list[int]]], out: list[str]) -> None:
        self._worker = worker
        self._started = started  # (host handle, indices of the prompts it answers)
        self._out = out
        self._waiting = bool(started)

    def done(self) -> bool:
        """Whether every answer is back (a waiting .result() would return at once)."""
        if not self._waiting:
            return True
        value = self._worker._request("poll", {"handles": [h for h, _ in self._started]})
        if isinstance(value, str):
            raise RuntimeError(value)
        if not isinstance(value, bool):
            raise ProtocolError("bad poll answer from host")
        return value

    def result(self) -> list[str]:
        """The answers in prompt order, waiting for those still out; a failed one is 'ERROR: ...'."""
        if self._waiting:
            for handle, part in self._started:
                _fill(self._out, part, self._worker._request("wait", {"handle": handle, "n": len(part)}))
            self._waiting = False
        return list(self._out)

    def __len__(self) -> int:
        return len(self._out)


class Worker:
    def __init__(self, chan: Channel, init: dict) -> None:
        self.chan = chan
        self.memory_mb = int(init["memory_mb"])
        self.output_chars = int(init["output_chars"])
        self.cell_timeout_s = float(init["cell_timeout_s"])
        self.room = RoomView(init["room_dir"])
        self.clock = CellClock(self.cell_timeout_s)
        self.next_request = 0
        self.n_cells = 0
        self.submitted: str | None = None
        self.module = types.ModuleType("__repl__")
        sys.modules["__repl__"] = self.module
        self.ns = self.module.__dict__
        self.pristine_builtins = {k: v for k, v in builtins.__dict__.items() if k not in REMOVED_BUILTINS}
        self.real_import = builtins.__import__
        self.hook_log: list[str] | None = None
        # False only when the host's test-only switch asks for the kernel layer alone: no audit hook,
        # no import allow-list, no descriptor/file-size/process rlimits.
        self.python_layer = init.get("python_layer", True) is not False
        self._stat_fd = self._open_stat()
        self.threads_at_start = self._threads()

    @staticmethod
    def _open_stat() -> int | None:
        # Opened now, before the fd limit and the audit hook: the kernel's thread count is the one
        # a cell cannot fake or race (_thread._count() lags a thread that has not started running).
        try:
            return os.open("/proc/self/stat", os.O_RDONLY)
        except OSError:
            return None

    def _threads(self) -> int:
        if self._stat_fd is not None:
            stat = os.pread(self._stat_fd, 4096, 0).decode("ascii", "replace")
            return int(stat.rsplit(")", 1)[1].split()[17])  # field 20, num_threads
        return 1 + _thread._count()

    # -- functions the model calls ---------------------------------------------
    def _guarded_import(self, name, globals=None, locals=None, fromlist=(), level=0):
        if level:
            raise SandboxImportError("relative imports are not available in the sandbox")
        if not isinstance(name, str) or name.partition(".")[0] not in ALLOWED_MODULES:
            allowed = ", ".join(sorted(ALLOWED_MODULES - {"__future__"}))
            raise SandboxImportError(
                f"import of {name!r} is not allowed in the sandbox; allowed modules: {allowed}"
            )
        return self.real_import(name, globals, locals, fromlist, level)

    def _request(self, kind: str, payload: dict):
        self.next_request += 1
        rid = self.next_request
        self.clock.pause()  # time spent waiting on subagents is not the cell's compute time
        try:
            self.chan.send({"t": "llm", "id": rid, "kind": kind, "payload": payload})
            while True:
                msg = self.chan.recv()
                if msg.get("t") == "llm_result" and msg.get("id") == rid:
                    return msg.get("value")
                raise ProtocolError(f"expected llm_result {rid}, got {msg.get('t')!r}")
        finally:
            self.clock.resume()

    def llm_batch(self, prompts: list[str]) -> list[str]:
        """Ask subagents each prompt concurrently; answers keep the order, a failed one is 'ERROR: ...'."""
        prompts = _prompt_list(prompts, "llm_batch")
        out: list[str] = [""] * len(prompts)
        for part in _parts(prompts, out):
            _fill(out, part, self._request("batch", {"prompts": [prompts[i] for i in part]}))
        return out

    def llm_batch_async(self, prompts: list[str]) -> Pending:
        """Start subagents on each prompt and return at once: their answers come with ``.result()``.

        The subagents keep reading while this cell and the root's next turns go on (until the episode
        ends); ``.done()`` says whether every answer is back.
        """
        prompts = _prompt_list(prompts, "llm_batch_async")
        out: list[str] = [""] * len(prompts)
        started: list[tuple[int, list[int]]] = []
        for part in _parts(prompts, out):
            handle = self._request("start", {"prompts": [prompts[i] for i in part]})
            if isinstance(handle, str):  # the host could not start it: every item of the part is that error
                for i in part:
                    out[i] = handle
            elif isinstance(handle, int):
                started.append((handle, part))
            else:
                raise ProtocolError("bad llm_batch_async answer from host")
        return Pending(self, started, out)

    def llm_query(self, prompt: str) -> str:
        """Ask one subagent; returns its answer, or an 'ERROR: ...' string."""
        if not isinstance(prompt, str):
            raise TypeError(f"llm_query(prompt): expected str, got {type(prompt).__name__}")
        return self.llm_batch([prompt])[0]

    def rlm_query(self, prompt: str, docs=None) -> str:
        """Give a child RLM its own REPL over ``docs`` (documents or paths) and return its answer."""
        if not isinstance(prompt, str):
            raise TypeError(f"rlm_query(prompt, docs): prompt must be str, got {type(prompt).__name__}")
        if docs is None:
            items = []
        elif isinstance(docs, str) or hasattr(docs, "path"):
            items = [docs]
        else:
            items = list(docs)
        paths = []
        for d in items:
            path = d if isinstance(d, str) else getattr(d, "path", None)
            if not isinstance(path, str):
                raise TypeError(
                    f"rlm_query(prompt, docs): expected documents or paths, got {type(d).__name__}"
                )
            paths.append(self.room.doc(path).path)  # KeyError with a hint for an unknown path
        out = self._request("rlm", {"prompt": prompt, "paths": paths})
        if not isinstance(out, str):
            raise ProtocolError("bad rlm_query answer from host")
        return out

    def submit(self, memo: str) -> None:
        """Record the final memo; the root loop ends the episode after this cell."""
        if not isinstance(memo, str):
            raise TypeError(f"submit(memo): expected str, got {type(memo).__name__}")
        if len(memo) > MAX_MEMO_CHARS:
            raise ValueError(f"submit(memo): {len(memo)} characters, the limit is {MAX_MEMO_CHARS}")
        self.submitted = memo

    # -- running cells ---------------------------------------------------------
    def _rebind(self) -> None:
        b = dict(self.pristine_builtins)
        if self.python_layer:
            b["__import__"] = self._guarded_import
        else:  # the test-only switch: the kernel layer alone (see load_seccomp)
            b.update(open=builtins.open, __import__=self.real_import)
        self.ns["__builtins__"] = b
        self.ns["__name__"] = "__repl__"
        self.ns["room"] = self.room
        self.ns["documents"] = self.room.documents
        self.ns["llm_query"] = self.llm_query
        self.ns["llm_batch"] = self.llm_batch
        self.ns["llm_batch_async"] = self.llm_batch_async
        self.ns["rlm_query"] = self.rlm_query
        self.ns["submit"] = self.submit

    def _describe(self, e: BaseException) -> tuple[str, str | None]:
        if isinstance(e, MemoryError):
            return f"MemoryError: cell exceeded the memory limit ({self.memory_mb} MB)", "memory"
        # Only model-code frames, and only their lines are looked up: their source is in linecache,
        # while reading the worker's own files would be an open() the audit hook refuses.
        cell_frames = (
            (f, n) for f, n in traceback.walk_tb(e.__traceback__) if f.f_code.co_filename.startswith("<cell-")
        )
        frames = traceback.StackSummary.extract(cell_frames, limit=None)
        lines = []
        if frames:
            lines.append("Traceback (most recent call last):\n")
            lines.extend(traceback.format_list(frames[-TRACEBACK_FRAMES:]))
        try:
            lines.extend(traceback.format_exception_only(type(e), e))
        except Exception:
            lines.append(f"{type(e).__name__}: <unprintable>\n")
        text = "".join(lines).rstrip()
        if len(text) > MAX_ERROR_CHARS:
            text = text[: MAX_ERROR_CHARS // 2] + "\n...\n" + text[-MAX_ERROR_CHARS // 2 :]
        return text, ("sandbox" if isinstance(e, SandboxViolation | SandboxImportError) else None)

    def run_cell(self, code: str) -> dict:
        self.n_cells += 1
        name = f"<cell-{self.n_cells}>"
        out = CappedOutput(self.output_chars)
        self.submitted = None
        error: str | None = None
        limit: str | None = None
        real_stdout, real_stderr = sys.stdout, sys.stderr
        started = time.monotonic()
        try:
            self._rebind()
            linecache.cache[name] = (len(code), None, code.splitlines(True), name)
            sys.stdout = sys.stderr = out
            self.clock.start()
            try:
                exec(compile(code, name, "exec"), self.ns)
            except CellTimeout:
                raise
            except BaseException as e:  # noqa: B902  (SystemExit, KeyboardInterrupt: all end the cell)
                error, limit = self._describe(e)
        except CellTimeout:
            error, limit = f"TimeoutError: cell exceeded {self.cell_timeout_s} s", "timeout"
        finally:
            self.clock.stop()
            sys.stdout, sys.stderr = real_stdout, real_stderr
        refused = list(self.hook_log or [])
        if self.hook_log is not None:
            self.hook_log.clear()
        if refused and limit is None:
            limit = "sandbox"
            if error is None:  # the cell caught the refusal; still tell the root what was stopped
                error = "SandboxViolation: refused " + "; ".join(refused)
        if limit is None and out.dropped:
            limit = "output"
        if limit == "memory":
            gc.collect()
        restart = self._threads() > self.threads_at_start
        if restart:
            error = ((error + "\n") if error else "") + "SandboxViolation: the cell left threads running"
            limit = "sandbox"
        return {
            "t": "done",
            "output": out.getvalue(),
            "error": _clean(error),
            "limit": limit,
            "submitted": _clean(self.submitted),
            "restart": restart,
            "seconds": time.monotonic() - started,
        }

    def serve(self) -> None:
        while True:
            try:
                msg = self.chan.recv()
            except (EOFError, OSError):
                os._exit(0)
            t = msg.get("t")
            if t == "cell" and isinstance(msg.get("code"), str):
                try:
                    result = self.run_cell(msg["code"])
                except CellTimeout:  # the alarm landed in the worker's own bookkeeping
                    result = {
                        "t": "done",
                        "output": "",
                        "error": f"TimeoutError: cell exceeded {self.cell_timeout_s} s",
                        "limit": "timeout",
                        "submitted": None,
                        "restart": False,
                        "seconds": self.cell_timeout_s,
                    }
                self.chan.send(result)
            elif t == "exit":
                os._exit(0)
            else:
                raise ProtocolError(f"unexpected message from host: {t!r}")


def _warm_up() -> None:
    """Exercise lazy paths of allowed modules so their hidden imports happen before the hook."""
    for enc in PRELOAD_ENCODINGS:
        "x".encode(enc)
    datetime.datetime.strptime("2024-01-31", "%Y-%m-%d")
    collections.namedtuple("_Warm", "a b")
    f"{1234:n}"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] != "--fd":
        sys.stderr.write("usage: worker.py --fd N (started by pipeline.harness.sandbox)\n")
        sys.exit(2)
    t0 = time.monotonic()
    faulthandler.enable()  # a segfault leaves its cause on stderr for the host's crash message
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past RLIMIT_FSIZE fails instead of killing
    chan = Channel(int(argv[1]))
    init = chan.recv()
    if init.get("t") != "init":
        raise ProtocolError(f"expected init, got {init.get('t')!r}")
    worker = Worker(chan, init)
    _warm_up()
    os.environ.clear()
    if isinstance(init.get("cwd"), str):
        os.chdir(init["cwd"])
    if isinstance(init.get("seccomp"), str):
        load_seccomp(init["seccomp"])
    limits = _set_limits(worker.memory_mb, worker.python_layer)
    gc.collect()
    worker.hook_log = []
    if worker.python_layer:
        sys.addaudithook(_make_audit_hook(worker.hook_log))
    chan.send(
        {
            "t": "ready",
            "pid": os.getpid(),
            "n_documents": len(worker.room),
            "n_tokens": worker.room.n_tokens,
            "load_s": time.monotonic() - t0,
            "limits": limits,
        }
    )
    worker.serve()


if __name__ == "__main__":
    main()
