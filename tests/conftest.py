"""Shared pytest fixtures.

- ``smollm2_path``: the embedded SmolLM2-135M-Instruct as a safetensors folder
  (converted once; ``RLM_MODEL_CACHE`` chooses the cache folder).
- ``transformers_server``: a real ``transformers serve`` process on a free
  local port serving that folder offline; yields ``ServedModel(base_url, model)``.
- ``vllm_port``: one real vLLM server (CPU build, .venv-vllm) for the whole
  session, shared by the serving, judge and RL tests (a start costs about
  40 s on 2 cores); ``vllm_overrides(run_dir, port)`` points a tiny-recipe
  config at it. The one test that kills it is marked ``kills_vllm`` and runs
  last.
- ``distilled``: one real tiny ``distill`` with its root on that vLLM server,
  shared by the tests that read it (its run folder's recipe points at the
  server, so commands on a copy without ``--recipe`` use it too).

Tests that use any of them are marked ``@pytest.mark.slow``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

# Nothing in the test suite may reach the Hugging Face hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # Two workers on two cores: one thread each (and for what they start). With two OpenMP threads
    # per worker they spin against each other: 20.3 min for the suite, 15.8 with one (docs/benchmarks.md).
    os.environ.setdefault("RLM_TORCH_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = Path(os.environ.get("RLM_VLLM_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))


# What only a test marked slow may start: `make test-fast` promises none of it (a model, a server,
# a browser, a subprocess stage), and the guard below holds every unmarked test to that.
HEAVY_MODULES = ("pipeline", "stages", "vllm", "accelerate", "ray")
HEAVY_PROGRAMS = (
    "chromium", "chromium-browser", "google-chrome", "transformers", "accelerate", "vllm", "ray", "raylet", "gcs_server",
)  # fmt: skip


def heavy_command(argv: list[str]) -> str | None:
    """What in ``argv`` makes a test slow (a stage, a server, a browser, a test driver), or None."""
    if argv and Path(argv[0]).name in HEAVY_PROGRAMS:
        return Path(argv[0]).name
    for flag, module in zip(argv, argv[1:], strict=False):
        if flag == "-m" and module.split(".")[0] in HEAVY_MODULES:
            return f"python -m {module}"
    drivers = [a for a in argv if a.endswith(".py") and Path(a).resolve().is_relative_to(ROOT / "tests")]
    return f"the driver {Path(drivers[0]).name}" if drivers else None


@pytest.fixture(autouse=True)
def _unmarked_tests_start_nothing_heavy(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    if request.node.get_closest_marker("slow"):
        return
    from pipeline.llm import smollm2

    def refuse(what: str):
        pytest.fail(f"{request.node.nodeid} starts {what}: mark it @pytest.mark.slow", pytrace=False)

    popen_init = subprocess.Popen.__init__

    def guarded_init(self, args, *rest, **kwargs):
        argv = [str(a) for a in args] if isinstance(args, list | tuple) else str(args).split()
        what = heavy_command(argv)
        if what:
            refuse(what)
        popen_init(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded_init)
    monkeypatch.setattr(smollm2, "ensure_model", lambda *a, **k: refuse("the embedded model"))


# Session servers under `make test` (pytest-xdist, --dist loadgroup): every test that uses one runs
# in the same worker, so each server starts once; the other worker takes the rest meanwhile. One vLLM
# group, not two: two servers beside SFT and GRPO on 2 cores ran every vLLM test 1.5-3x slower (load
# average 11), and the suite took longer than with one (docs/benchmarks.md).
SERVER_FIXTURES = {"vllm_port": "vllm", "transformers_server": "transformers_server"}


def pytest_itemcollected(item: pytest.Item) -> None:
    fixtures = getattr(item, "fixturenames", ())
    group = next((g for f, g in SERVER_FIXTURES.items() if f in fixtures), None)
    if group:
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The test that kills the shared vLLM server runs after every test that uses it (a stable sort).
    items.sort(key=lambda item: item.get_closest_marker("kills_vllm") is not None)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    from pipeline.llm.smollm2 import ensure_model

    return ensure_model()  # default cache, or RLM_MODEL_CACHE when set


@dataclass
class ServedModel:
    base_url: str  # e.g. http://127.0.0.1:PORT/v1
    model: str  # the name the server expects in requests


def _serve_command(model_path: Path, port: int) -> list[str]:
    exe = shutil.which("transformers", path=str(Path(sys.executable).parent)) or shutil.which("transformers")
    if exe is None:
        pytest.skip("the `transformers` command line is not installed")
    return [
        exe, "serve", str(model_path),
        "--host", "127.0.0.1", "--port", str(port),
        "--device", "cpu", "--dtype", "float32", "--log-level", "warning",
    ]  # fmt: skip


@pytest.fixture(scope="session")
def transformers_server(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory):
    port = free_port()
    log_path = tmp_path_factory.mktemp("transformers_serve") / "serve.log"
    from pipeline.llm.local import sensible_threads

    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    # Same reasoning as the local backend: oversubscribed OpenMP threads crawl on a shared CPU.
    env.setdefault("OMP_NUM_THREADS", str(sensible_threads()))
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            _serve_command(smollm2_path, port), stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,
        )  # fmt: skip
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"transformers serve exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}"
                )
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"transformers serve did not answer in 180 s:\n{log_path.read_text()[-3000:]}"
                )
            time.sleep(0.5)
        # The server is pinned to the model it was started with and expects that name.
        yield ServedModel(base_url=base_url, model=str(smollm2_path))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def require_vllm() -> None:
    """Skip without vLLM; under `make test` (RLM_REQUIRE_VLLM=1) a missing vLLM fails instead."""
    if not VLLM_PYTHON.exists():
        if os.environ.get("RLM_REQUIRE_VLLM") == "1":
            pytest.fail(f"{VLLM_PYTHON} missing: `make vllm-env` installs vLLM")
        pytest.skip("vLLM is not installed (`make vllm-env`)")


def vllm_overrides(run_dir: Path, port: int) -> list[str]:
    """The tiny recipe with its root on the vLLM server at ``port``, one program turn as the default recipe.

    The server arguments are the llm-judge recipe's (LoRA at runtime, compact JSON for structured
    outputs), so one server serves sampling, runtime LoRA modules, RL and the judge.
    """
    return [
        f"run.dir={run_dir}",
        "models.root.kind=openai",
        "models.root.model=smollm2",
        f"models.root.base_url=http://127.0.0.1:{port}/v1",
        "models.root.context_tokens=8192",
        "models.root.timeout_s=300",
        # As the default recipe: on CPU every extra turn is a full re-prefill of the conversation.
        "harness.max_turns=1",
        "serve.models={smollm2: embedded}",
        f"serve.python={VLLM_PYTHON}",
        "serve.args=[--max-model-len, '8192', --enable-prefix-caching, "
        "--structured-outputs-config.backend, xgrammar, --structured-outputs-config.disable_any_whitespace, 'true']",
        # One core kept for vLLM's scheduler, as vLLM itself chooses on x86: in the suite the other xdist
        # worker runs its tests beside this server, and a server decoding on both cores (what
        # pipeline.serving.server_env picks on 2 cores for a machine's only workload) made the suite
        # 19.2 min instead of about 15 (docs/benchmarks.md, "Test suite time").
        "serve.env={VLLM_CPU_KVCACHE_SPACE: '2', VLLM_CPU_NUM_OF_RESERVED_CPU: '1'}",
        "serve.start_timeout_s=420",
        # runtime LoRA modules, side by side: the tests of modules, lifecycles and RL share this server (the
        # merged weights a command loads into a server of its own: tests/serving/test_merged_weights.py)
        "serve.adapters=lora",
    ]


@pytest.fixture(scope="session")
def vllm_port(tmp_path_factory: pytest.TempPathFactory):
    """The port of one vLLM server started as `pipeline serve` starts it, for the whole session."""
    from pipeline.config import load_config
    from pipeline.serving import running_servers

    require_vllm()
    port = free_port()
    cfg = load_config("tiny", vllm_overrides(tmp_path_factory.mktemp("vllm_server"), port))
    with running_servers(cfg) as specs:
        assert [(s.port, s.served_name, s.lora) for s in specs] == [(port, "smollm2", True)]
        yield port


def vllm_server_pid(port: int) -> int:
    """The pid of the one process listening on ``port`` (to tell a server that kept running from a restart)."""
    import psutil

    pids = {
        c.pid
        for c in psutil.net_connections("tcp")
        if c.status == "LISTEN" and c.laddr and c.laddr.port == port
    }
    assert len(pids) == 1, pids
    return pids.pop()


@dataclass
class DistilledRun:
    run_dir: Path  # the run folder of one `distill` on the tiny recipe; copy it before changing it
    stdout: str  # what distill printed
    port: int  # the session's vLLM server, which sampled, served and evaluated the run's policies
    server_pid: int  # that server's pid before distill started

    def copy(self, dest: Path) -> Path:
        shutil.copytree(self.run_dir, dest)
        return dest


@pytest.fixture(scope="session")
def distilled(tmp_path_factory: pytest.TempPathFactory, vllm_port: int) -> DistilledRun:
    """One real `python -m pipeline --recipe tiny distill`, its root on the session's vLLM server.

    Shared by the tests that read its run folder; tests that change one work on
    ``distilled.copy(tmp_path / ...)``. On the server, its sample and evaluate stages take seconds
    where the in-process root took minutes on 2 cores; the SFT policy is trained by TRL as always
    and evaluated as a LoRA module loaded into the running server, as `make distill` does.
    """
    import contextlib
    import io

    from pipeline.cli import main

    run = tmp_path_factory.mktemp("distilled") / "run"
    pid = vllm_server_pid(vllm_port)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["--recipe", "tiny", "distill", *vllm_overrides(run, vllm_port)])
    assert code == 0, out.getvalue()[-3000:]
    return DistilledRun(run, out.getvalue(), vllm_port, pid)
