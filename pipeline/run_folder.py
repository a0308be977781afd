"""The run folder describes its run: one appended record per command, each config kept once.

``<run.dir>/commands.jsonl`` gets one JSON line per command that changes the
run (stages, distill, nightly, room generation and imports): when it started
and ended, the command line, the config hash, its status and the counts the
stage returned. ``<run.dir>/configs/<hash>.yaml`` holds each resolved config
the first time it is used, so a record's hash always points at its config.
Read-only commands (``rooms list``, ``sql``, ``config``) leave the folder
as it is.

The folder also knows its recipe: the first command on it writes
``recipe.yaml`` (the resolved config, less ``run.dir`` / ``run.db``, which
say where the folder is, not what it does), and a later command given no
``--recipe`` starts from it (``load``). Paths the warehouse stores are
relative to the folder (``stored_path`` / ``resolve_path``), so a copied or
moved run folder keeps working.
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
from pipeline.config import PipelineConfig, load_config

RECORDS = "commands.jsonl"
RECIPE = "recipe.yaml"


def stored_path(run_dir: str | Path, path: str | Path) -> str:
    """``path`` as the warehouse stores it: relative to the run folder when inside it, else absolute."""
    p = Path(path).resolve()
    try:
        return p.relative_to(Path(run_dir).resolve()).as_posix()
    except ValueError:
        return str(p)


def resolve_path(run_dir: str | Path, stored: str | Path) -> Path:
    """A stored path back to a usable one (relative ones are under the run folder)."""
    p = Path(stored).expanduser()
    return p if p.is_absolute() else Path(run_dir) / p


def load(recipe: str | None, overrides: list[str]) -> tuple[PipelineConfig, str]:
    """The command's config and a line saying where it came from ('' when from --recipe or defaults).

    Without ``--recipe``, an existing run folder's ``recipe.yaml`` takes the recipe's place.
    """
    if recipe:
        return load_config(recipe, overrides), ""
    cfg = load_config(None, overrides)
    own = Path(cfg.run.dir) / RECIPE
    if not own.exists():
        return cfg, ""
    return load_config(own, overrides), f"config: using the run folder's recipe {own} (no --recipe given)"


def save_recipe(cfg: PipelineConfig, recipe: str | None) -> None:
    """The first command on a run folder leaves its resolved config there as the folder's recipe."""
    path = Path(cfg.run.dir) / RECIPE
    if path.exists():
        return
    data = cfg.to_dict()
    for key in ("dir", "db"):
        data["run"].pop(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    head = f"# The resolved config that created this run folder (from {recipe or 'the defaults'}).\n"
    tmp.write_text(head + yaml.safe_dump(data, sort_keys=False))
    tmp.replace(path)


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
def recorded(
    cfg: PipelineConfig, argv: list[str], command: str, recipe: str | None = None
) -> Iterator[dict[str, Any]]:
    """Record one command: the body puts the stage's result under ``out["result"]``."""
    save_recipe(cfg, recipe)
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
                # the recipe named on the command line; null: the run folder's own recipe.yaml
                "recipe": recipe,
                "started_at": started.isoformat(timespec="seconds"),
                "wall_s": round(time.monotonic() - t0, 3),
                "status": status,
                "error": error,
                "counts": _scalars(out.get("result")),
            },
        )
