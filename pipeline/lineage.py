"""Lineage: each step's inputs and outputs by id, the CLI's defaults, and the chain behind a policy.

Every library step (pipeline.steps) records what it consumed and what it
made as rows of ``lineage`` under its ``stage_runs`` id. Two things read them:

- the CLI edge (``newest_output``): a command given no explicit input takes
  the output of the newest *finished* run of the step before, and prints
  which. Re-running a filter that lands on an earlier selection makes that
  selection current again, because currency is "made by the newest run",
  not "created most recently".
- ``python -m pipeline lineage <id>`` (``chain`` + ``render``): policy ←
  train run ← dataset ← selection ← trajectories (per room and policy) ←
  rooms, with config hashes. The adapter's model card carries the same text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import duckdb

from pipeline import db
from pipeline.errors import UserError


class UnknownId(UserError):
    """An id that names no policy, dataset or selection of the warehouse."""


def record(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    stage: str,
    inputs: list[tuple[str, str]],
    outputs: list[tuple[str, str]],
) -> None:
    """The step's (kind, id) inputs and outputs under its stage run."""
    now = db.now()
    rows = [
        {"run_id": run_id, "stage": stage, "role": role, "kind": kind, "id": id_, "created_at": now}
        for role, pairs in (("input", inputs), ("output", outputs))
        for kind, id_ in dict.fromkeys(pairs)  # order kept, duplicates dropped
    ]
    if rows:
        db.write_rows(con, "lineage", rows)


@dataclass
class Made:
    """An output of a finished stage run: what the CLI prints when it picks a default."""

    id: str
    run_id: str
    ended_at: Any

    def says(self, kind: str, stage: str) -> str:
        return f"using {kind} {self.id} (made by the {stage} run {self.run_id} at {self.ended_at:%Y-%m-%d %H:%M:%S})"


def newest_output(con: duckdb.DuckDBPyConnection, stage: str, kind: str) -> Made | None:
    """The ``kind`` output of the newest finished run of ``stage``, or None."""
    row = con.execute(
        """
        select l.id, r.run_id, r.ended_at
        from lineage as l
        join stage_runs as r using (run_id)
        where l.stage = ? and l.kind = ? and l.role = 'output' and r.status = 'ok'
        order by r.ended_at desc, r.run_id desc
        limit 1
        """,
        [stage, kind],
    ).fetchone()
    return Made(*row) if row else None


# --------------------------------------------------------------------------- the chain


@dataclass
class Chain:
    """What one id was made from, down to the rooms; fields are None above where the id sits."""

    policy: dict | None = None
    train_run: dict | None = None
    dataset: dict | None = None
    selection: dict | None = None
    rl_run: dict | None = None  # a policy trained by GRPO (pipeline.training.rl) instead of SFT
    trajectories: list[dict] = field(default_factory=list)  # accepted, per room and policy
    rooms: list[dict] = field(default_factory=list)


def _one(con: duckdb.DuckDBPyConnection, sql: str, params: list) -> dict | None:
    rows = db.fetch_dicts(con, sql, params)
    return rows[0] if rows else None


def kind_of(con: duckdb.DuckDBPyConnection, any_id: str) -> str:
    for kind, sql in [
        ("policy", "select count(*) from policies where policy_id = ?"),
        ("dataset", "select count(*) from datasets where dataset_id = ?"),
        ("selection", "select count(*) from selections where selection_id = ?"),
    ]:
        if con.execute(sql, [any_id]).fetchone()[0]:
            return kind
    raise UnknownId(f"lineage: no policy, dataset or selection {any_id!r} in the warehouse")


def chain(con: duckdb.DuckDBPyConnection, any_id: str) -> Chain:
    """The chain below a policy, dataset or selection id, read from the warehouse."""
    kind, out = kind_of(con, any_id), Chain()
    selection_id = any_id if kind == "selection" else None
    dataset_id = any_id if kind == "dataset" else None
    if kind == "policy":
        out.policy = _one(
            con,
            "select policy_id, base_model, adapter, parent_id, train_id, created_at from policies "
            "where policy_id = ?",
            [any_id],
        )
        if out.policy["train_id"]:
            out.train_run = _one(
                con,
                "select train_id, dataset_id, parent_policy_id, config_hash, status, final_train_loss, "
                "ended_at from train_runs where train_id = ?",
                [out.policy["train_id"]],
            )
            dataset_id = out.train_run and out.train_run["dataset_id"]
            out.rl_run = _one(
                con,
                "select r.rl_id, r.start_policy_id, r.config_hash, r.generation, r.status, "
                "(select count(*) from rl_steps s where s.rl_id = r.rl_id) as steps, "
                "(select count(*) from rl_rollouts o where o.rl_id = r.rl_id) as rollouts "
                "from rl_runs r where r.rl_id = ?",
                [out.policy["train_id"]],
            )
    if dataset_id:
        out.dataset = _one(
            con,
            "select dataset_id, selection_id, version, n_train, n_validation, n_dropped_too_long, "
            "card->>'config_hash' as config_hash, created_at from datasets where dataset_id = ?",
            [dataset_id],
        )
        selection_id = out.dataset and out.dataset["selection_id"]
    if selection_id:
        out.selection = _one(
            con,
            "select selection_id, count(*) as considered, count(*) filter (where accepted) as accepted, "
            "any_value(params) as params from selections where selection_id = ? group by selection_id",
            [selection_id],
        )
        out.selection["params_hash"] = _params_hash(out.selection.pop("params"))
        out.trajectories = db.fetch_dicts(
            con,
            "select coalesce(r.name, t.room_id) as room, t.policy_id, count(*) as n "
            "from selections s join trajectories t using (trajectory_id) left join rooms r using (room_id) "
            "where s.selection_id = ? and s.accepted group by all order by room, t.policy_id",
            [selection_id],
        )
        out.rooms = db.fetch_dicts(
            con,
            "select r.name as room, r.room_id, r.split, r.source, r.n_documents from rooms r "
            "where r.room_id in (select t.room_id from selections s join trajectories t using (trajectory_id) "
            "where s.selection_id = ? and s.accepted) order by r.name",
            [selection_id],
        )
    return out


def _params_hash(params: Any) -> str:
    from pipeline.ids import content_hash

    data = json.loads(params) if isinstance(params, str) else params
    return content_hash(data, length=12)


def render(c: Chain) -> str:
    """The chain as indented text, newest artefact first (the `lineage` command and model cards)."""
    lines: list[str] = []
    if c.policy:
        p = c.policy
        lines.append(
            f"policy {p['policy_id']}  base model {p['base_model']}, adapter {p['adapter'] or '-'}, "
            f"parent {p['parent_id'] or '-'}"
        )
    if c.train_run:
        t = c.train_run
        loss = f"{t['final_train_loss']:.4f}" if t["final_train_loss"] is not None else "-"
        lines.append(
            f"  <- train run {t['train_id']}  config {t['config_hash']}, status {t['status']}, "
            f"final train loss {loss}, parent policy {t['parent_policy_id']}"
        )
    if c.rl_run:
        r = c.rl_run
        lines.append(
            f"  <- rl run {r['rl_id']}  config {r['config_hash']}, status {r['status']}, {r['generation']} "
            f"generation, {r['steps']} steps, {r['rollouts']} rollouts (trajectories of purpose rl), "
            f"start policy {r['start_policy_id']}"
        )
    if c.dataset:
        d = c.dataset
        lines.append(
            f"  <- dataset {d['dataset_id']} v{d['version']}  config {d['config_hash']}, {d['n_train']} train / "
            f"{d['n_validation']} validation / {d['n_dropped_too_long']} dropped"
        )
    if c.selection:
        s = c.selection
        lines.append(
            f"  <- selection {s['selection_id']}  filter params {s['params_hash']}, "
            f"{s['accepted']} accepted of {s['considered']}"
        )
        lines.append(f"  <- trajectories ({sum(t['n'] for t in c.trajectories)} accepted)")
        lines += [f"       {t['room']:24s} {t['policy_id']:20s} {t['n']:4d}" for t in c.trajectories]
        lines.append(f"  <- rooms ({len(c.rooms)})")
        lines += [
            f"       {r['room']:24s} {r['room_id']:16s} {r['split']:8s} {r['source']:10s} {r['n_documents']} documents"
            for r in c.rooms
        ]
    elif c.policy and not c.rl_run:
        lines.append("  (no train run: a base policy is not made from a selection)")
    return "\n".join(lines)
