"""Policies: base model + adapter + prompt variant + harness + sampling, stored once.

A policy's id is a stable hash of exactly those fields, so sampling the same
policy twice (tonight and tomorrow) finds the same rows, and a trained
adapter is a new policy whose ``parent_id`` is the policy that produced its
training data.

How the root's requests name the model is decided by the backend's kind,
never by the model's name: the local backend loads base model and adapter
itself; an OpenAI-compatible server (vLLM) is asked for the base model's
served name, or for an adapter's LoRA module, which is named after the
policy and recorded as ``served_model`` (pipeline.llm.lora_modules loads it
into the running server when it is missing). Where the server holds the
policy's merged weights instead (``serve.adapters``, pipeline.serving), the
requests carry the base's served name and ``serve_policy`` loads the weights
before the policy's batch; the trace records the name each request carried.
``adapter`` is stored relative to the run folder, so the id survives moving
the folder.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from pipeline import db
from pipeline.config import BackendConfig, PipelineConfig
from pipeline.errors import UserError
from pipeline.harness.prompts import variant_hash
from pipeline.ids import content_hash
from pipeline.llm.smollm2 import DEFAULT_MODEL_NAME
from pipeline.run_folder import resolve_path, stored_path


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
    # A hash of the adapter's weights (adapter_weights_hash), where the trainer recorded one: then the id,
    # and the LoRA module named after it, change whenever the weights do.
    weights: str | None = None
    # A hash of the prompt variant's text (pipeline.harness.prompts.variant_hash): editing a variant's
    # prompt or worked example makes a new policy, so its episodes are never pooled with the old text's.
    prompt_hash: str | None = None

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
        if self.weights:  # only then: the ids of policies registered without a hash stay as they were
            key["weights"] = self.weights
        if self.prompt_hash:  # likewise
            key["prompt_hash"] = self.prompt_hash
        # The prefix says how the weights were made: GRPO runs (pipeline.training.rl) have rl- train ids.
        kind = "grpo" if (self.train_id or "").startswith("rl-") else "sft" if self.adapter else "base"
        return f"{kind}-{content_hash(key, length=12)}"

    @property
    def lora_module(self) -> str | None:
        """The LoRA module name a server gives this policy's adapter (None: no adapter, or loaded locally)."""
        return self.policy_id if self.adapter and self.backend != "local" else None

    @property
    def served_model(self) -> str:
        """The model name the root's requests carry."""
        return self.lora_module or self.base_model


def base_policy(cfg: PipelineConfig) -> Policy:
    root = cfg.models.root
    return Policy(
        # An empty model is the embedded default; the policy names it, so its id says which model ran.
        base_model=root.model or DEFAULT_MODEL_NAME,
        backend=root.kind,
        adapter=stored_path(cfg.run.dir, root.adapter) if root.adapter else None,
        prompt=cfg.harness.prompt,
        harness=cfg.harness.kind,
        sampling=dataclasses.asdict(cfg.sampling),
        prompt_hash=variant_hash(cfg.harness.prompt),
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
                    "served_model": policy.served_model,
                    "weights_hash": policy.weights,
                    "prompt_hash": policy.prompt_hash,
                    "created_at": db.now(),
                }
            ],
        )
    return pid


class UnknownPolicy(UserError, KeyError):
    """A policy id (from a recipe key or the warehouse) that no ``policies`` row has."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def load_policy(con: duckdb.DuckDBPyConnection, policy_id: str, field: str = "") -> Policy:
    """The registered policy ``policy_id``; ``field`` names the recipe key it came from, for the error."""
    rows = db.fetch_dicts(con, "select * from policies where policy_id = ?", [policy_id])
    if not rows:
        known = [r[0] for r in con.execute("select policy_id from policies order by created_at").fetchall()]
        shown = ", ".join(known[-8:]) or "none yet"
        raise UnknownPolicy(
            f"{field + ': ' if field else ''}no policy {policy_id!r} in the warehouse (newest: {shown})"
        )
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
        weights=r.get("weights_hash"),
        prompt_hash=r.get("prompt_hash"),
    )


def adapter_weights_hash(folder: str | Path) -> str:
    """A short hash of an adapter folder's weights file (what the server loads as the module)."""
    import hashlib

    folder = Path(folder)
    files = sorted(folder.glob("adapter_model.*"))
    if not files:
        raise FileNotFoundError(f"{folder}: no adapter_model.* weights file")
    digest = hashlib.sha256()
    for f in files:
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:12]


def root_backend_config(policy: Policy, cfg: PipelineConfig) -> BackendConfig:
    """The root backend settings for sampling this policy (recipe settings + the policy's model/adapter)."""
    root = dataclasses.replace(cfg.models.root)
    root.kind = policy.backend
    if policy.backend == "local":
        # The local backend reads "" as the embedded default model: give it back "" as the recipe wrote it.
        root.model = "" if policy.base_model == DEFAULT_MODEL_NAME else policy.base_model
        root.adapter = str(resolve_path(cfg.run.dir, policy.adapter)) if policy.adapter else ""
    else:
        root.model = served_name(policy, cfg)
        root.adapter = ""
    return root


def served_name(policy: Policy, cfg: PipelineConfig) -> str:
    """The model name the root's requests for ``policy`` carry on the recipe's server: its LoRA module, or
    the base's served name where the server holds the policy's merged weights (pipeline.serving)."""
    from pipeline.serving import merges_adapters

    return policy.base_model if merges_adapters(cfg) else policy.served_model


def serve_policy(policy: Policy, cfg: PipelineConfig) -> None:
    """Make the root's server serve ``policy``: load its merged weights (the base's for the base policy),
    or its LoRA module, whichever the server takes (pipeline.serving.merges_adapters).

    Under merged weights the server serves one policy at a time: call this before each policy's batch.
    """
    if policy.backend == "local" or not cfg.models.root.base_url:
        return
    from pipeline import serving

    if serving.merges_adapters(cfg):
        if not policy.adapter:
            serving.load_root_weights(cfg, serving.BASE_WEIGHTS, serving.root_weights(cfg))
            return
        from pipeline.llm.merged_weights import merge_adapter, merged_dir

        adapter = resolve_path(cfg.run.dir, policy.adapter).resolve()
        key = policy.weights or adapter_weights_hash(adapter)
        folder = merge_adapter(serving.root_weights(cfg), adapter, merged_dir(cfg.run.dir, key))
        serving.load_root_weights(cfg, key, folder)
    elif policy.lora_module:
        from pipeline.llm.lora_modules import ensure_lora_module

        adapter = resolve_path(cfg.run.dir, policy.adapter).resolve()
        ensure_lora_module(cfg.models.root.base_url, policy.lora_module, adapter)
