"""USD prices of the run's models in the warehouse (table model_prices), from the config.

Prices live in config (``models.<role>.usd_per_mtok_in/out``, 0 by default:
the embedded models run on the machine itself); the marts price tokens by
joining ``model_prices`` on the name the warehouse records for a model, so
``pipeline sql`` shows the same cost the report does. The sample and report
commands record the prices of the config they run with; the newest recorded
price of a model wins.
"""

from __future__ import annotations

import duckdb

from pipeline import db
from pipeline.config import BackendConfig, PipelineConfig
from pipeline.llm.extractive import NAME as EXTRACTIVE_NAME
from pipeline.llm.smollm2 import DEFAULT_MODEL_NAME

# Backends that run in-process on the machine: no per-token price unless one is set.
EMBEDDED_KINDS = ("local", "extractive")


def priced_name(backend: BackendConfig) -> str:
    """The name the warehouse records for this backend's model (policies.base_model, subcalls.model)."""
    if backend.model:
        return backend.model
    return {"extractive": EXTRACTIVE_NAME, "local": DEFAULT_MODEL_NAME}.get(backend.kind, "default")


def price_rows(cfg: PipelineConfig) -> list[dict]:
    """One row per model the config names; a model named by two roles keeps the first role's price."""
    rows: dict[str, dict] = {}
    # the judge's tokens are not a trajectory's cost; its price is kept for when it grades
    roles = ("root", "subagent", "judge") if "llm" in cfg.grade.judges else ("root", "subagent")
    for role in roles:
        b: BackendConfig = getattr(cfg.models, role)
        name = priced_name(b)
        rows.setdefault(
            name,
            {
                "model": name,
                "role": role,
                "usd_per_mtok_in": float(b.usd_per_mtok_in),
                "usd_per_mtok_out": float(b.usd_per_mtok_out),
                "recorded_at": db.now(),
            },
        )
    return list(rows.values())


def record_prices(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig) -> list[dict]:
    """Upsert the config's prices into model_prices; returns the rows written."""
    rows = price_rows(cfg)
    with db.transaction(con):
        con.executemany(
            "insert or replace into model_prices values (?, ?, ?, ?, ?)",
            [
                [r["model"], r["role"], r["usd_per_mtok_in"], r["usd_per_mtok_out"], r["recorded_at"]]
                for r in rows
            ],
        )
    return rows


def embedded(cfg: PipelineConfig) -> list[str]:
    """'root (smollm2-135m-instruct)'-style names of the config's embedded, unpriced models."""
    out = []
    for role in ("root", "subagent"):
        b: BackendConfig = getattr(cfg.models, role)
        if b.kind in EMBEDDED_KINDS and not (b.usd_per_mtok_in or b.usd_per_mtok_out):
            out.append(f"{role} ({priced_name(b)})")
    return out
