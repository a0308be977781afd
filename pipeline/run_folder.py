"""The run folder describes its run: one appended record per command, each config kept once.

``<run.dir>/commands.jsonl`` gets one JSON line per command that changes the
run (stages, distill, nightly, room generation and imports): when it started
and ended, the command line, the config hash, its status and the counts the
stage returned. ``<run.dir>/configs/<hash>.yaml`` holds each resolved config
the first time it is used, so a record's hash always points at its config.
Read-only commands (``rooms list``, ``sql``, ``config``) leave the folder
as it is.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from pipeline import db
from pipeline.config import PipelineConfig

RECORDS = "commands.jsonl"


def config_file(run_dir: Path, config_hash: str) -> Path:
    return run_dir / "configs" / f"{config_hash}.yaml"


def save_config(cfg: PipelineConfig) -> Path:
    """Write the resolved config under its hash, once (atomically: a reader never sees half a file)."""
    path = config_file(Path(cfg.run.dir), cfg.hash())
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
        tmp.replace(path)
    return path


def _scalars(result: Any) -> dict[str, Any]:
    """The counts worth keeping from a stage's result: its scalar values."""
    if not isinstance(result, dict):
        return {}
    return {k: v for k, v in result.items() if isinstance(v, (str, int, float, bool)) or v is None}


def append_record(run_dir: Path, record: dict[str, Any]) -> None:
    """One line, one write, opened for append: concurrent commands never interleave a record."""
    run_dir.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, default=str) + "\n"
    fd = os.open(run_dir / RECORDS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def read_records(run_dir: Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / RECORDS
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@contextlib.contextmanager
def recorded(cfg: PipelineConfig, argv: list[str], command: str) -> Iterator[dict[str, Any]]:
    """Record one command: the body puts the stage's result under ``out["result"]``."""
    save_config(cfg)
    started, t0 = db.now(), time.monotonic()
    out: dict[str, Any] = {}
    status, error = "ok", None
    try:
        yield out
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    except BaseException as exc:
        status, error = "failed", f"{type(exc).__name__}: {exc}"[:500]
        raise
    finally:
        append_record(
            Path(cfg.run.dir),
            {
                "command": command,
                "argv": shlex.join(["python", "-m", "pipeline", *argv]),
                "config_hash": cfg.hash(),
                "started_at": started.isoformat(timespec="seconds"),
                "wall_s": round(time.monotonic() - t0, 3),
                "status": status,
                "error": error,
                "counts": _scalars(out.get("result")),
            },
        )
