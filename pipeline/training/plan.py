"""What a training run will do, read from the warehouse before anything is written.

The dataset is the id the caller names (the CLI defaults it to the newest
dataset run's output and says so). ``train_id`` is derived from the dataset and the training config,
so a finished run is found again (and not repeated) and a killed one resumes
in the same adapter folder. The parent policy is the one that sampled most of
the dataset's examples.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import duckdb

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.ids import content_hash, stable_id
from pipeline.policies import load_policy
from pipeline.run_folder import resolve_path
from pipeline.training.errors import TrainError


@dataclass
class Plan:
    train_id: str
    config_hash: str
    dataset_id: str
    dataset_path: str
    parent_policy_id: str
    base_model: str
    adapter_dir: str
    status: str | None  # None: never started; running | failed | ok


def config_hash(cfg: PipelineConfig) -> str:
    """Hash of what shapes the weights: the train section (less the dataset choice) and the seed."""
    t = asdict(cfg.train)
    t.pop("dataset_id", None)
    return content_hash({"train": t, "seed": cfg.run.seed}, length=16)


def train_id_for(dataset_id: str, chash: str) -> str:
    return stable_id(dataset_id, chash, prefix="train-", sep="\0", length=12)


def dataset_row(con: duckdb.DuckDBPyConnection, dataset_id: str) -> dict[str, Any]:
    """The ``datasets`` row to train on."""
    rows = db.fetch_dicts(con, "select * from datasets where dataset_id = ?", [dataset_id])
    if not rows:
        raise TrainError(f"train.dataset_id: no dataset {dataset_id!r} in the warehouse")
    return rows[0]


def parent_policy_id(con: duckdb.DuckDBPyConnection, dataset_id: str) -> str:
    """The policy that sampled most of the dataset's (kept) trajectories; ties go to the smaller id."""
    row = con.execute(
        """
        select t.policy_id, count(*) as n
        from dataset_examples e
        join trajectories t using (trajectory_id)
        where e.dataset_id = ? and e.split in ('train', 'validation')
        group by t.policy_id
        order by n desc, t.policy_id
        limit 1
        """,
        [dataset_id],
    ).fetchone()
    if row is None:
        raise TrainError(f"dataset {dataset_id!r} has no train/validation examples in dataset_examples")
    return row[0]


def make_plan(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, dataset_id: str) -> Plan:
    ds = dataset_row(con, dataset_id)
    chash = config_hash(cfg)
    train_id = train_id_for(ds["dataset_id"], chash)
    parent = parent_policy_id(con, ds["dataset_id"])
    status = con.execute("select status from train_runs where train_id = ?", [train_id]).fetchone()
    adapter_dir = Path(cfg.run.dir) / "adapters" / train_id
    return Plan(
        train_id=train_id,
        config_hash=chash,
        dataset_id=ds["dataset_id"],
        dataset_path=str(resolve_path(cfg.run.dir, ds["path"])),
        parent_policy_id=parent,
        base_model=load_policy(con, parent).base_model,
        adapter_dir=str(adapter_dir.resolve()),
        status=status[0] if status else None,
    )


def adapter_complete(adapter_dir: str | Path) -> bool:
    d = Path(adapter_dir)
    return (d / "adapter_config.json").exists() and (d / "adapter_model.safetensors").exists()


def already_trained(plan: Plan) -> bool:
    """The run finished and its adapter is on disk: nothing to do."""
    return plan.status == "ok" and adapter_complete(plan.adapter_dir)


def finished_counts(con: duckdb.DuckDBPyConnection, plan: Plan) -> dict[str, Any]:
    """The train stage's counts for a run that already finished."""
    row = db.fetch_dicts(con, "select * from train_runs where train_id = ?", [plan.train_id])[0]
    return {
        "skipped": True,
        "train_id": plan.train_id,
        "dataset_id": plan.dataset_id,
        "policy_id": row["policy_id"],
        "adapter_path": row["adapter_path"],
        "final_train_loss": row["final_train_loss"],
        "final_eval_loss": row["final_eval_loss"],
    }
