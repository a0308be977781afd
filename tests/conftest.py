"""Shared pytest fixtures.

- ``smollm2_path``: the embedded SmolLM2-135M-Instruct as a safetensors folder
  (converted once; ``RLM_MODEL_CACHE`` chooses the cache folder).
- ``transformers_server``: a real ``transformers serve`` process on a free
  local port serving that folder offline; yields ``ServedModel(base_url, model)``.

Tests that use either are marked ``@pytest.mark.slow``.
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


@dataclass
class DistilledRun:
    run_dir: Path  # the run folder of one `distill` on the tiny recipe; copy it before changing it
    stdout: str  # what distill printed

    def copy(self, dest: Path) -> Path:
        shutil.copytree(self.run_dir, dest)
        return dest


@pytest.fixture(scope="session")
def distilled(tmp_path_factory: pytest.TempPathFactory) -> DistilledRun:
    """One real `python -m pipeline --recipe tiny distill`, shared by the tests that read its run folder.

    Tests that change a run folder work on ``distilled.copy(tmp_path / ...)``.
    """
    import contextlib
    import io

    from pipeline.cli import main

    run = tmp_path_factory.mktemp("distilled") / "run"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["--recipe", "tiny", "distill", f"run.dir={run}"])
    assert code == 0, out.getvalue()[-3000:]
    return DistilledRun(run, out.getvalue())
