"""Host side of the REPL sandbox: one worker process per trajectory, driven from asyncio.

``Sandbox`` starts pipeline/harness/worker.py in isolated mode
(``python -I -S -B``, empty environment, its own session, an empty temporary
working directory, killed with the host through PR_SET_PDEATHSIG), gives it
an exported room (pipeline.harness.room_export) and runs cells in it.
Several sandboxes share one event loop; an ``llm_query`` / ``llm_batch`` /
``rlm_query`` call in a cell arrives as a request that ``on_llm`` answers
while ``run_cell`` awaits, so subagent calls of different trajectories
overlap. ``llm_batch_async`` arrives as ``start`` (the handler starts the
batch and answers with a handle at once), then ``poll`` and ``wait``
requests naming handles; the batch runs on the handler's side between
cells.

The worker runs hostile code, so nothing it sends is trusted: every frame is
size-checked and validated, and a bad frame, a dead worker or a cell that
outlives its time limit plus grace ends that cell as a limit in the
``CellResult`` (never an exception here); the worker is then killed and
restarted with a fresh namespace and the result says so (``reset``).
Time the worker spends waiting for ``on_llm`` is not counted against the
cell's time limit; the handler enforces subagent budgets.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.harness import kernel_layer
from pipeline.harness.output_cut import cut
from pipeline.harness.room_view import INDEX_FILE
from pipeline.harness.subagents import MAX_BATCH_PROMPTS

WORKER_PATH = Path(__file__).with_name("worker.py")
MAX_FRAME_BYTES = 64 * 1024 * 1024  # the largest frame accepted from a worker (a big llm_batch)
START_TIMEOUT_S = 60.0
STDERR_TAIL_CHARS = 4000
LIMIT_KINDS = ("timeout", "memory", "output", "sandbox", "crash")

LLMHandler = Callable[[str, dict], Awaitable[Any]]
"""("batch", {"prompts": [...]}) -> list[str];  ("rlm", {"prompt": str, "paths": [...]}) -> str"""


@dataclass
class SandboxLimits:
    cell_timeout_s: float = 20.0  # soft limit inside the worker; the host kills at cell_timeout_s + grace_s
    memory_mb: int = 1024  # address space beyond the interpreter and the mapped room
    output_chars: int = 4000  # printed characters kept per cell before the cut marker
    grace_s: float = 2.0  # how long a timed-out cell may take to stop before the worker is killed
    level: str = "auto"  # kernel layer: auto (strongest available) | bwrap+seccomp | seccomp | python
    min_level: str = "python"  # refuse to start below this level
    # Test-only: start the worker without its Python-level layer (audit hook, import allow-list,
    # descriptor/file-size/process rlimits) to show what the kernel layer stops on its own.
    python_layer: bool = True


@dataclass
class CellResult:
    output: str  # printed output, already cut with the marker
    error: str | None  # short traceback (model frames only) or limit message
    limit: str | None  # "timeout" | "memory" | "output" | "sandbox" | "crash" | None
    submitted: str | None  # memo passed to submit() in this cell
    reset: bool  # the worker was restarted and the namespace lost
    seconds: float


class SandboxError(RuntimeError):
    """The sandbox itself cannot run (worker fails to start, used after close) — not a cell's fault."""


class _Protocol(Exception):
    """The worker sent something that breaks the protocol (the message says what)."""


def _pdeathsig_preexec() -> Callable[[], None] | None:
    """A preexec_fn that makes the kernel SIGKILL the worker when the host dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)

    return preexec


_PREEXEC = _pdeathsig_preexec()


def _kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _error_string(e: BaseException) -> str:
    msg = str(e) or type(e).__name__
    return f"ERROR: {type(e).__name__}: {msg}"[:2000]


class Sandbox:
    """A sandboxed Python REPL over one room; ``run_cell`` runs code in its persistent namespace."""

    def __init__(
        self, room_dir: Path, limits: SandboxLimits | None = None, on_llm: LLMHandler | None = None
    ) -> None:
        self.room_dir = Path(room_dir).resolve()
        self.limits = limits or SandboxLimits()
        self.on_llm = on_llm
        self.pids: list[int] = []  # every worker started, for cleanup checks
        self.restarts = 0
        # The worker's last "ready" message: documents, tokens, load time, rlimits applied.
        self.ready_info: dict[str, Any] = {}
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._stderr_tail = ""
        self._stderr_task: asyncio.Task | None = None
        self._finalizer: weakref.finalize | None = None
        self._workdir: str | None = None
        self._lock: asyncio.Lock | None = None
        self._closed = False
        self.level: str | None = None  # the kernel layer the worker runs under (kernel_layer.LEVELS)

    # -- lifecycle -------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def workdir(self) -> Path | None:
        """The worker's (empty) working directory."""
        return Path(self._workdir) if self._workdir else None

    async def __aenter__(self) -> Sandbox:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        if self._closed:
            raise SandboxError("sandbox is closed")
        if not (self.room_dir / INDEX_FILE).exists():
            raise SandboxError(
                f"{self.room_dir}: no {INDEX_FILE} (export the room with room_export.export_room)"
            )
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._proc is None:
                await self._spawn()

    async def close(self) -> None:
        """Kill the worker and remove its working directory; safe to call twice."""
        self._closed = True
        await self._kill()
        if self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    async def _spawn(self) -> None:
        if self._workdir is None:
            self._workdir = tempfile.mkdtemp(prefix="rlm-repl-")
        try:
            self.level = kernel_layer.resolve_level(self.limits.level, self.limits.min_level)
        except (kernel_layer.KernelLayerError, ValueError) as e:
            raise SandboxError(str(e)) from None
        host_sock, child_sock = socket.socketpair()
        argv = [
            kernel_layer.PYTHON,
            "-I",  # no environment variables, no user site, no script directory on sys.path
            "-S",  # no site-packages: only the standard library is importable
            "-B",
            str(WORKER_PATH),
            "--fd",
            str(child_sock.fileno()),
        ]
        if self.level == "bwrap+seccomp":
            argv = kernel_layer.bwrap_argv(self.room_dir, Path(self._workdir)) + argv
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=(child_sock.fileno(),),
                env={},
                cwd=self._workdir,
                start_new_session=True,  # terminal signals go to the host, which closes the worker itself
                preexec_fn=_PREEXEC,
            )
        finally:
            child_sock.close()
        self.pids.append(self._proc.pid)
        self._finalizer = weakref.finalize(self, _kill_quietly, self._proc.pid)
        self._stderr_tail = ""
        self._stderr_task = asyncio.ensure_future(self._drain_stderr(self._proc))
        self._reader, self._writer = await asyncio.open_unix_connection(sock=host_sock)
        init = {
            "t": "init",
            "room_dir": str(self.room_dir),
            "cwd": self._workdir,
            "memory_mb": int(self.limits.memory_mb),
            "output_chars": int(self.limits.output_chars),
            "cell_timeout_s": float(self.limits.cell_timeout_s),
            # libseccomp's binding, which the worker loads to build and load its filter
            "seccomp": kernel_layer.seccomp_module_path() if self.level != "python" else None,
            "python_layer": bool(self.limits.python_layer),
        }
        try:
            await self._send(init)
            msg = await asyncio.wait_for(self._recv(), START_TIMEOUT_S)
            # inside bubblewrap's PID namespace the worker has its own numbering
            own_pid = self.level == "bwrap+seccomp" or msg.get("pid") == self._proc.pid
            if msg.get("t") != "ready" or not own_pid:
                raise _Protocol(f"expected ready, got {str(msg)[:200]}")
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError, _Protocol) as e:
            await asyncio.sleep(0.05)  # let the stderr drain catch the worker's last words
            tail = self._stderr_tail.strip()[-1500:]
            await self._kill()
            raise SandboxError(
                f"REPL worker failed to start ({type(e).__name__}: {e}); worker stderr:\n{tail}"
            ) from None
        self.ready_info = msg

    async def _drain_stderr(self, proc: asyncio.subprocess.Process) -> None:
        # Always drained (a full pipe would block the worker); only the tail is kept, for crash reports.
        assert proc.stderr is not None
        try:
            while chunk := await proc.stderr.read(65536):
                self._stderr_tail = (self._stderr_tail + chunk.decode("utf-8", "replace"))[
                    -STDERR_TAIL_CHARS:
                ]
        except (asyncio.CancelledError, ConnectionError):
            pass

    async def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._reader = None
        if proc is not None:
            if proc.returncode is None:
                try:
                    proc.kill()
                except ProcessLookupError:
                    pass
            await proc.wait()
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._stderr_task is not None:
            task, self._stderr_task = self._stderr_task, None
            try:
                await asyncio.wait_for(task, 1.0)
            except (TimeoutError, asyncio.CancelledError):
                task.cancel()

    # -- frames ----------------------------------------------------------------
    async def _send(self, msg: dict) -> None:
        assert self._writer is not None
        data = json.dumps(msg).encode("utf-8")
        self._writer.write(len(data).to_bytes(4, "big") + data)
        await self._writer.drain()

    async def _recv(self) -> dict:
        assert self._reader is not None
        n = int.from_bytes(await self._reader.readexactly(4), "big")
        if n > MAX_FRAME_BYTES:
            raise _Protocol(f"frame of {n} bytes (limit {MAX_FRAME_BYTES})")
        data = await self._reader.readexactly(n)
        try:
            msg = json.loads(data)
        except (ValueError, RecursionError) as e:
            raise _Protocol(f"frame is not JSON ({type(e).__name__})") from None
        if not isinstance(msg, dict) or not isinstance(msg.get("t"), str):
            raise _Protocol("frame is not an object with a 't' field")
        return msg

    # -- cells -----------------------------------------------------------------
    async def run_cell(self, code: str) -> CellResult:
        """Run ``code`` in the namespace; limits and worker failures come back in the result."""
        if not isinstance(code, str):
            raise TypeError(f"run_cell(code): expected str, got {type(code).__name__}")
        if self._closed:
            raise SandboxError("sandbox is closed")
        if self._lock is None:
            await self.start()
        assert self._lock is not None
        async with self._lock:
            if self._proc is None:  # first cell, or the last one was cancelled
                await self._spawn()
            t0 = time.monotonic()
            try:
                return await self._run_locked(code, t0)
            except asyncio.CancelledError:
                await self._kill()  # the cell's state is unknown: the next cell gets a fresh worker
                raise

    async def _run_locked(self, code: str, t0: float) -> CellResult:
        lim = self.limits
        budget = lim.cell_timeout_s + lim.grace_s
        try:
            await self._send({"t": "cell", "code": code})
            while True:
                waited = time.monotonic()
                msg = await asyncio.wait_for(self._recv(), max(budget, 0.0))
                budget -= time.monotonic() - waited
                if msg["t"] == "llm":
                    reply = await self._serve_llm(msg)
                    await self._send(reply)
                elif msg["t"] == "done":
                    return await self._finish(msg, t0)
                else:
                    raise _Protocol(f"unexpected message {msg['t']!r:.40}")
        except TimeoutError:
            return await self._reset(
                t0,
                f"TimeoutError: cell exceeded {lim.cell_timeout_s} s and did not stop; "
                "the REPL was restarted and its variables are lost",
                "timeout",
            )
        except (asyncio.IncompleteReadError, ConnectionError, BrokenPipeError, _Protocol) as e:
            why = await self._death_reason(e)
            return await self._reset(
                t0,
                f"ReplCrash: the REPL worker died ({why}); the REPL was restarted and its variables are lost",
                "crash",
            )

    async def _death_reason(self, e: BaseException) -> str:
        if isinstance(e, _Protocol):
            return f"protocol violation: {e}"
        rc = None
        if self._proc is not None:
            try:
                rc = await asyncio.wait_for(self._proc.wait(), 1.0)
            except TimeoutError:
                rc = None
        if rc is not None and rc > 128 and self.level == "bwrap+seccomp":
            rc = 128 - rc  # bubblewrap exits with 128 + the signal that killed the worker inside it
        if rc is not None and rc < 0:
            try:
                return f"killed by {signal.Signals(-rc).name}"
            except ValueError:
                return f"killed by signal {-rc}"
        if rc is not None:
            return f"exit status {rc}"
        lines = [ln for ln in self._stderr_tail.strip().splitlines() if ln.strip()]
        return lines[0][:200] if lines else "connection lost"

    async def _reset(self, t0: float, error: str, limit: str) -> CellResult:
        await self._kill()
        self.restarts += 1
        await self._spawn()
        return CellResult(
            output="", error=error, limit=limit, submitted=None, reset=True, seconds=time.monotonic() - t0
        )

    async def _finish(self, msg: dict, t0: float) -> CellResult:
        output, error, limit, submitted = (
            msg.get("output"),
            msg.get("error"),
            msg.get("limit"),
            msg.get("submitted"),
        )
        if not (
            isinstance(output, str)
            and (error is None or isinstance(error, str))
            and (limit is None or limit in LIMIT_KINDS)
            and (submitted is None or isinstance(submitted, str))
        ):
            raise _Protocol("malformed done message")
        result = CellResult(
            # Re-cut host-side: a hostile worker may send more than it was allowed.
            output=cut(output, self.limits.output_chars, slack=40),
            error=error[:4000] if error else error,
            limit=limit,
            submitted=submitted,
            reset=False,
            seconds=time.monotonic() - t0,
        )
        if msg.get("restart") is True:  # the cell left threads behind: do not keep that process
            await self._kill()
            self.restarts += 1
            await self._spawn()
            result.reset = True
            result.error = (result.error or "") + "\nthe REPL was restarted and its variables are lost"
        return result

    async def _serve_llm(self, msg: dict) -> dict:
        rid, kind, payload = msg.get("id"), msg.get("kind"), msg.get("payload")
        if not isinstance(rid, int) or not isinstance(payload, dict):
            raise _Protocol("malformed llm request")
        if kind in ("batch", "start"):
            prompts = payload.get("prompts")
            if (
                not isinstance(prompts, list)
                or not 0 < len(prompts) <= MAX_BATCH_PROMPTS
                or not all(isinstance(p, str) for p in prompts)
            ):
                raise _Protocol(f"malformed llm_batch{'_async' if kind == 'start' else ''} request")
            value: Any = await (self._call_batch(prompts) if kind == "batch" else self._call_start(prompts))
        elif kind == "wait":
            handle, n = payload.get("handle"), payload.get("n")
            if not isinstance(handle, int) or not isinstance(n, int) or not 0 < n <= MAX_BATCH_PROMPTS:
                raise _Protocol("malformed wait request")
            value = await self._answers("wait", {"handle": handle}, n)
        elif kind == "poll":
            handles = payload.get("handles")
            if not isinstance(handles, list) or not all(isinstance(h, int) for h in handles):
                raise _Protocol("malformed poll request")
            value = await self._call_poll(handles)
        elif kind == "rlm":
            prompt, paths = payload.get("prompt"), payload.get("paths")
            if (
                not isinstance(prompt, str)
                or not isinstance(paths, list)
                or not all(isinstance(p, str) for p in paths)
            ):
                raise _Protocol("malformed rlm_query request")
            value = await self._call_rlm(prompt, paths)
        else:
            raise _Protocol(f"unknown llm request kind {str(kind)[:40]!r}")
        return {"t": "llm_result", "id": rid, "value": value}

    async def _call_batch(self, prompts: list[str]) -> list[str]:
        return await self._answers("batch", {"prompts": prompts}, len(prompts))

    async def _call_start(self, prompts: list[str]) -> int | str:
        """llm_batch_async: the handler starts the batch and returns its handle (an int), or an error."""
        return await self._one("start", {"prompts": prompts}, int, "a handle")

    async def _call_poll(self, handles: list[int]) -> bool | str:
        return await self._one("poll", {"handles": handles}, bool, "a bool")

    async def _one(self, kind: str, payload: dict, expected: type, what: str) -> Any:
        """The handler's one ``expected`` value for a ``kind`` call, or an ERROR string: never a crash."""
        if self.on_llm is None:
            return "ERROR: no LLM handler is configured for this sandbox"
        try:
            res = await self.on_llm(kind, payload)
        except Exception as e:  # a failing handler is the cell's problem, reported as text
            return _error_string(e)
        return (
            res
            if isinstance(res, expected)
            else f"ERROR: LLM handler returned a {type(res).__name__}, not {what}"
        )

    async def _answers(self, kind: str, payload: dict, n: int) -> list[str]:
        """``n`` answers of the handler's ``kind`` call, each a str: a failure is an ERROR item, never a crash."""
        if self.on_llm is None:
            return ["ERROR: no LLM handler is configured for this sandbox"] * n
        try:
            res = await self.on_llm(kind, payload)
        except Exception as e:  # a failing handler is the cell's problem, reported as text
            return [_error_string(e)] * n
        if not isinstance(res, list | tuple) or len(res) != n:
            got = len(res) if isinstance(res, list | tuple) else type(res).__name__
            return [f"ERROR: LLM handler returned {got} answers for {n} prompts"] * n
        out = []
        for r in res:
            if isinstance(r, str):
                out.append(r)
            elif isinstance(r, BaseException):
                out.append(_error_string(r))
            else:
                out.append(f"ERROR: LLM handler returned a {type(r).__name__}, not a str")
        return out

    async def _call_rlm(self, prompt: str, paths: list[str]) -> str:
        return await self._one("rlm", {"prompt": prompt, "paths": paths}, str, "a str")
