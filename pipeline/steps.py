"""The steps of a round, each named by what it consumes and returning what it made.

One function per step: ladder (the program-check ladder on the run's rooms),
sample, grade, select (the filter), build_dataset, train, evaluate. Each records itself as a ``stage_runs`` row and its inputs
and outputs as ``lineage`` rows (pipeline.lineage), on the connection it is
given. Nothing here looks for "the newest" anything: the stages and the
round pass ids, and only the CLI picks a default (pipeline.lineage).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import duckdb

from pipeline import costs, db, evaluation, lineage, sampling
from pipeline.config import PipelineConfig
from pipeline.errors import UserError
from pipeline.metrics import headline
from pipeline.policies import Policy, register_policy
from pipeline.training import dataset as datasets
from pipeline.training import selection
from pipeline.training.plan import Plan, already_trained, finished_counts, make_plan


class MissingInput(UserError):
    """A step was called without the id it consumes."""


def _require(value: str, key: str, flag: str) -> str:
    if not value:
        raise MissingInput(f"{key} is empty: name it ({flag} or {key}=...) or run the step before it")
    return value


def ladder(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, rooms: list[str]) -> dict[str, Any]:
    """Score the program-check ladder on ``rooms`` that lack it: what a root can earn on each
    (pipeline.grading.program_check); the mart trajectory_rungs places trajectories on it."""
    from pipeline.grading.program_check import record_ladder

    with db.stage_run(con, "ladder", cfg.hash("harness", "models")) as counts:
        counts.update(record_ladder(con, cfg, rooms))
    print(
        f"ladder: {counts['rooms_scored']} rooms scored, {counts['rooms_kept']} already scored",
        file=sys.stderr,
    )
    return counts


@dataclass
class Sampled:
    policy_id: str
    rooms: list[str]
    counts: dict[str, int]


def sample(
    con: duckdb.DuckDBPyConnection,
    cfg: PipelineConfig,
    policy: Policy,
    rooms: list[str],
    k: int,
    purpose: str,
    desc: str = "sample",
) -> Sampled:
    """Top every (room, policy) up to k trajectories."""
    with db.stage_run(con, "sample", cfg.hash("sample", "harness", "sampling", "models")) as counts:
        costs.record_prices(con, cfg)  # what these tokens cost (the marts' cost columns)
        register_policy(con, policy)
        made = sampling.sample_policy(con, cfg, policy, rooms, k, purpose, desc=desc)
        counts.update(policy_id=policy.policy_id, rooms=len(rooms), **made)
        lineage.record(con, counts["run_id"], "sample", [("policy", policy.policy_id)], [])
    return Sampled(policy.policy_id, rooms, made)


def grade(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig) -> dict[str, Any]:
    """Grade every ungraded trajectory with the recipe's judges; returns the counts."""
    from pipeline.grading.agreement import agreement_report
    from pipeline.grading.grade_run import check_judges, grade_llm, grade_reference, graded_by_older_version
    from pipeline.grading.reference import GRADER_VERSION

    check_judges(cfg.grade.judges)
    with db.stage_run(con, "grade", cfg.hash("grade", "models")) as counts:
        if "reference" in cfg.grade.judges:
            counts["graded_reference"] = grade_reference(con, cfg)
            stale = graded_by_older_version(con)
            if stale:
                counts["graded_by_older_version"] = stale
                print(
                    f"{stale} trajectories keep scores from an older grader version "
                    f"(current: {GRADER_VERSION}); `grade --regrade` grades them again",
                    file=sys.stderr,
                )
        if "llm" in cfg.grade.judges:
            counts["graded_llm"] = grade_llm(con, cfg)
        if {"reference", "llm"} <= set(cfg.grade.judges):
            counts["agreement"] = agreement_report(con)
            for row in counts["agreement"]:
                print(row)
    return counts


def select(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig) -> selection.Selection:
    """The rejection filter over every graded training trajectory; zero accepted is an error."""
    with db.stage_run(con, "filter", cfg.hash("filter")) as counts:
        chosen = selection.select(con, cfg)
        counts.update(chosen.counts())
        print(selection.funnel_table(con, chosen.selection_id))
        # Recorded and printed first, so a run that accepts nothing still shows where they went.
        selection.require_accepted(chosen)
        lineage.record(con, counts["run_id"], "filter", [], [("selection", chosen.selection_id)])
    return chosen


@dataclass
class BuiltDataset:
    dataset_id: str
    selection_id: str
    reused: bool
    counts: dict[str, Any] = field(default_factory=dict)


def build_dataset(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, selection_id: str) -> BuiltDataset:
    """The chat-format dataset of ``selection_id`` (found again when it was built before)."""
    _require(selection_id, "dataset.selection_id", "--selection")
    chash = datasets.config_hash(cfg)
    with db.stage_run(con, "dataset", chash) as counts:
        made = datasets.build(con, cfg, selection_id, chash)
        counts.update(made)
        lineage.record(
            con, counts["run_id"], "dataset", [("selection", selection_id)], [("dataset", made["dataset_id"])]
        )
    return BuiltDataset(made["dataset_id"], selection_id, made["reused"], counts)


@dataclass
class TrainedPolicy:
    train_id: str
    dataset_id: str
    policy_id: str
    skipped: bool
    counts: dict[str, Any] = field(default_factory=dict)


def plan_training(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, dataset_id: str) -> Plan:
    return make_plan(con, cfg, _require(dataset_id, "train.dataset_id", "--dataset"))


def train(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, plan: Plan) -> TrainedPolicy:
    """LoRA SFT on the plan's dataset (skipped when that run already finished) -> a policy."""
    from pipeline.training.sft import fit

    with db.stage_run(con, "train", plan.config_hash) as counts:
        counts.update(finished_counts(con, plan) if already_trained(plan) else fit(cfg, plan, con))
        lineage.record(
            con,
            counts["run_id"],
            "train",
            [("dataset", plan.dataset_id), ("policy", plan.parent_policy_id)],
            [("train_run", plan.train_id), ("policy", counts["policy_id"])],
        )
    return TrainedPolicy(plan.train_id, plan.dataset_id, counts["policy_id"], bool(counts["skipped"]), counts)


@dataclass
class Evaluation:
    eval_id: str
    base_policy_id: str
    policy_ids: list[str]
    rooms: list[str]
    rows: list[dict]
    headline: str

    def lift(self, policy_id: str) -> dict | None:
        return next((r for r in self.rows if r["policy_id"] == policy_id and r["metric"] == "lift"), None)

    def metric(self, policy_id: str, metric: str) -> float | None:
        row = next((r for r in self.rows if r["policy_id"] == policy_id and r["metric"] == metric), None)
        return None if row is None else row["value"]

    def withheld(self, policy_id: str) -> bool:
        """The lift was not measured: too many episodes got no reply from the root's server."""
        return any(r["policy_id"] == policy_id and r["metric"] == "lift_withheld" for r in self.rows)


def evaluate(
    con: duckdb.DuckDBPyConnection,
    cfg: PipelineConfig,
    base: Policy,
    candidates: list[Policy],
    rooms: list[str],
    reuse: bool = False,
) -> Evaluation:
    """Base vs candidates on ``rooms`` (held out), with intervals and the paired lift.

    Every call samples a new evaluation (pipeline.evaluation). With ``reuse`` (a rerun of a round that
    made nothing new), an evaluation that already compared exactly these policies on these rooms is
    returned as it is, and its id printed.
    """
    if not candidates:
        raise MissingInput("evaluate.candidates is empty: name a policy (--policy) or train one first")
    ids = [base.policy_id, *[c.policy_id for c in candidates]]
    if reuse and (eval_id := evaluation.made_before(con, ids, rooms)):
        rows = db.fetch_dicts(con, "select * from evaluations where eval_id = $e", {"e": eval_id})
        text = headline(rows)
        print(f"evaluate: nothing new to compare; {eval_id} already compared these policies\n{text}")
        return Evaluation(eval_id, base.policy_id, ids, rooms, rows, text)
    with db.stage_run(con, "evaluate", cfg.hash("evaluate", "harness", "sampling", "models")) as counts:
        eval_id, rows = evaluation.evaluate_policies(con, cfg, base, candidates, rooms)
        text = headline(rows)
        print(text)
        counts.update(eval_id=eval_id, rooms=len(rooms), policies=1 + len(candidates), headline=text)
        lineage.record(
            con,
            counts["run_id"],
            "evaluate",
            [("policy", p) for p in ids] + [("room", r) for r in rooms],
            [("evaluation", eval_id)],
        )
    return Evaluation(eval_id, base.policy_id, ids, rooms, rows, text)


@dataclass
class RLTrained:
    rl_id: str
    start_policy_id: str
    policy_id: str
    skipped: bool
    counts: dict[str, Any] = field(default_factory=dict)


def rl(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, start_policy_id: str) -> RLTrained:
    """GRPO on the root from ``start_policy_id`` (skipped when that run already finished) -> a policy."""
    from pipeline.training import rl as grpo

    _require(start_policy_id, "rl.policy", "--policy")
    plan = grpo.make_plan(con, cfg, start_policy_id)
    done = grpo.already_trained(con, cfg, plan)
    grpo.lead(cfg, None if done else plan)  # under accelerate launch, the other processes train it too
    with db.stage_run(con, "rl", plan.config_hash) as counts:
        made = grpo.finished_counts(con, plan) if done else grpo.fit(con, cfg, plan)
        counts.update(made)
        rollouts = [
            r[0]
            for r in con.execute(
                "select trajectory_id from rl_rollouts where rl_id = ? order by step, slot", [plan.rl_id]
            ).fetchall()
        ]
        lineage.record(
            con,
            counts["run_id"],
            "rl",
            [("policy", plan.start.policy_id)] + [("room", r) for r in plan.rooms],
            [("rl_run", plan.rl_id), ("policy", made["policy_id"])] + [("trajectory", t) for t in rollouts],
        )
    return RLTrained(plan.rl_id, plan.start.policy_id, made["policy_id"], bool(made["skipped"]), counts)
