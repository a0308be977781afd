"""Policies: base model + adapter + prompt variant + harness + sampling, stored once.

A policy's id is a stable hash of exactly those fields, so sampling the same
policy twice (tonight and tomorrow) finds the same rows, and a trained
adapter is a new policy whose ``parent_id`` is the policy that produced its
training data.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import duckdb

from pipeline import db
from pipeline.config import BackendConfig, PipelineConfig


@dataclass
class Policy:
    base_model: str
    backend: str
    prompt: str
    harness: str
    sampling: dict[str, Any] = field(default_factory=dict)
    adapter: str | None = None
    parent_id: str | None = None
    train_id: str | None = None

    @property
    def policy_id(self) -> str:
        key = {
            "base_model": self.base_model,
            "backend": self.backend,
            "adapter": self.adapter,
            "prompt": self.prompt,
            "harness": self.harness,
            "sampling": self.sampling,
        }
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
        return f"{'sft' if self.adapter else 'base'}-{digest}"


def base_policy(cfg: PipelineConfig) -> Policy:
    root = cfg.models.root
    return Policy(
        base_model=root.model or "smollm2-135m-instruct",
        backend=root.kind,
        adapter=root.adapter or None,
        prompt=cfg.harness.prompt,
        harness=cfg.harness.kind,
        sampling=dataclasses.asdict(cfg.sampling),
    )


def register_policy(con: duckdb.DuckDBPyConnection, policy: Policy) -> str:
    """Insert the policy if new; return its id. Safe inside or outside a transaction."""
    pid = policy.policy_id
    exists = con.execute("select count(*) from policies where policy_id = ?", [pid]).fetchone()[0]
    if not exists:
        db.write_rows(
            con,
            "policies",
            [
                {
                    "policy_id": pid,
                    "base_model": policy.base_model,
                    "adapter": policy.adapter,
                    "backend": policy.backend,
                    "prompt": policy.prompt,
                    "harness": policy.harness,
                    "sampling": policy.sampling,
                    "parent_id": policy.parent_id,
                    "train_id": policy.train_id,
                    "created_at": db.now(),
                }
            ],
        )
    return pid


def load_policy(con: duckdb.DuckDBPyConnection, policy_id: str) -> Policy:
    rows = db.fetch_dicts(con, "select * from policies where policy_id = ?", [policy_id])
    if not rows:
        raise KeyError(f"no policy {policy_id!r} in the warehouse")
    r = rows[0]
    return Policy(
        base_model=r["base_model"],
        backend=r["backend"],
        prompt=r["prompt"],
        harness=r["harness"],
        sampling=json.loads(r["sampling"]),
        adapter=r["adapter"],
        parent_id=r["parent_id"],
        train_id=r["train_id"],
    )


def root_backend_config(policy: Policy, cfg: PipelineConfig) -> BackendConfig:
    """The root backend settings for sampling this policy (recipe settings + the policy's model/adapter)."""
    root = dataclasses.replace(cfg.models.root)
    root.kind = policy.backend
    root.model = (
        ""
        if policy.base_model == "smollm2-135m-instruct" and policy.backend == "local"
        else policy.base_model
    )
    if policy.backend == "local":
        root.adapter = policy.adapter or ""
    elif policy.adapter:
        # Served by vLLM as a LoRA module: the request's model name selects the adapter.
        root.model = policy.adapter
    return root
