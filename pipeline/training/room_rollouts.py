"""One GRPO step's rollouts: real harness episodes on rooms, stored, graded, and handed to TRL.

``RoomRollouts`` is the episode runner of pipeline.training.rl: TRL's prompts
(room names, each repeated ``rl.num_generations`` times) become episodes run
like the sampler runs them (same harness, sandbox and subagents), written to
the warehouse as trajectories of purpose ``rl``, graded by the reference
judge; the reward is the judge's headline (pipeline.training.rollouts turns
the episodes into TRL's token sequences). Here too: which weights sample
each step (``step_policy``), failed rollouts and their redo, replacement
groups for flat ones, the weight probe, and the bookkeeping in
``rl_rollouts``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.errors import UserError
from pipeline.ids import bucket
from pipeline.policies import Policy, adapter_weights_hash, register_policy, root_backend_config
from pipeline.run_folder import stored_path
from pipeline.training.rollouts import Episode, LivePolicy

PURPOSE = "rl"
# sample_index of a rollout: step * SLOTS + slot, unique per (sampling policy, room, purpose).
SLOTS = 100_000


class RLError(UserError):
    """An RL run that cannot start as configured."""


@dataclass
class RLPlan:
    rl_id: str
    config_hash: str
    start: Policy
    generation: str  # in_process | server
    adapter_dir: str  # absolute
    rooms: list[str]
    status: str | None  # None: never started; running | failed | ok


def rollout_sampling(cfg: PipelineConfig, start: Policy) -> dict[str, Any]:
    """The sampling of RL rollouts (what the loss scores): the start policy's, at rl.top_p and, when set,
    rl.temperature."""
    out = {**start.sampling, "top_p": cfg.rl.top_p}
    if cfg.rl.temperature is not None:
        out["temperature"] = cfg.rl.temperature
    return out


def step_policy(cfg: PipelineConfig, plan: RLPlan, step: int) -> Policy:
    """The policy whose weights sample step ``step``: the start policy's weights, then the adapter after
    step-1, at the rollouts' sampling. An adapter's policy carries the hash of its weights, so its LoRA
    module's name changes whenever they do (a server never serves another run's weights under it)."""
    sampling = rollout_sampling(cfg, plan.start)
    if step <= 1:
        return dataclasses.replace(plan.start, sampling=sampling)
    folder = Path(plan.adapter_dir) / "steps" / f"step-{step - 1}"
    return dataclasses.replace(
        plan.start,
        sampling=sampling,
        adapter=stored_path(cfg.run.dir, folder),
        parent_id=plan.start.policy_id,
        train_id=plan.rl_id,
        weights=adapter_weights_hash(folder),
    )


@dataclass
class StepStats:
    """What one step's rollouts measured, kept until the step's update is logged."""

    step: int
    sampling_policy_id: str
    rewards: list[float]  # of the rollouts trained on that earned one (failed rollouts have none)
    groups: int
    zero_advantage_share: float  # of the groups trained on
    n_copied: int
    n_over_budget: int
    rollout_s: float
    grade_s: float
    n_rollouts: int = 0  # trained on, failed ones included
    n_failed: int = 0  # trained on without a reward (failed before the root's first token or on the server)
    n_redone: int = 0
    n_replacement_groups: int = 0
    n_replaced: int = 0
    probe_diff: float | None = None
    tokens: int = 0
    trained_tokens: int = 0
    n_skipped: int | None = None  # rollouts the update left out (flat groups); None: skipping was off
    update_tokens: int | None = None  # tokens the update ran through the model; None: not packing
    rollout_ended: float = 0.0  # time.monotonic() when rollout_func returned
    sync_s: float = 0.0
    logs: dict[str, float] = field(default_factory=dict)


def rollout_scores(con: duckdb.DuckDBPyConnection, ids: list[str]) -> dict[str, dict[str, Any]]:
    """trajectory id -> the reference judge's newest grade (headline, quoted_words, cut), its probe
    coverage (the share of the room that reached any model; None before coverage was measured) and
    whether its memo was begun before the subagent call that returned last had come back, and its cost in
    USD at the recipe's prices (trajectory_scores.cost_usd)."""
    rows = db.fetch_dicts(
        con,
        """
        with coverage as (
            select trajectory_id, n_seen / greatest(n_probes, 1) as coverage
            from coverage
            where scope = 'all' and grouping = 'total' and list_contains(?, trajectory_id)
        )
        select m.trajectory_id, m.headline, m.quoted_words, m.cut, c.coverage, t.memo_before_delegation_done,
            s.cost_usd
        from memo_scores as m
        left join coverage as c using (trajectory_id)
        left join stg_trajectories as t using (trajectory_id)
        left join trajectory_scores as s using (trajectory_id)
        where m.judge = 'reference' and list_contains(?, m.trajectory_id)
        qualify row_number() over (partition by m.trajectory_id order by m.grader_version desc) = 1
        """,
        [ids, ids],
    )
    return {r["trajectory_id"]: r for r in rows}


def reward(
    score: dict[str, Any], coverage_weight: float = 0.0, overlap_weight: float = 0.0, cost_weight: float = 0.0
) -> float:
    """A rollout's reward: the judge's headline (0 for a memo the judge never scored), plus three optional
    terms, all off by default as in the reference report:

    - ``coverage_weight`` x its probe coverage (rl.coverage_weight);
    - ``overlap_weight`` x the headline when the root began its memo while subagents were still reading
      (rl.overlap_weight). It scales the headline rather than adding a constant, so a memo begun early
      that the judge does not pay earns nothing: the term rewards overlapping good work, not early text;
    - minus ``cost_weight`` x its cost in USD (rl.cost_weight): root and subagent tokens at the recipe's
      prices.
    """
    headline = score.get("headline") or 0.0
    total = headline
    if coverage_weight:
        total += coverage_weight * (score.get("coverage") or 0.0)
    if overlap_weight and score.get("memo_before_delegation_done"):
        total += overlap_weight * headline
    if cost_weight:
        total -= cost_weight * (score.get("cost_usd") or 0.0)
    return total


def _zero_advantage_share(rewards: list[float | None], group: int) -> float:
    groups = [rewards[i : i + group] for i in range(0, len(rewards), group)]
    return sum(_flat(g) for g in groups) / max(1, len(groups))


def _flat(rewards: list[float | None]) -> bool:
    """A group whose scored rollouts all earned one reward (or none scored): its advantages are all 0."""
    scored = [r for r in rewards if r is not None]
    return not scored or max(scored) - min(scored) < 1e-12


def failed_on_server(trace: Any) -> bool:
    """An episode that says nothing about the policy: it never got the root's first token (timeout or
    error before it, as room_policy_summary's serving_failed_rate counts), or the root's server failed."""
    if trace is None:
        return True
    if trace.status not in ("timeout", "error"):
        return False
    no_token = not any(t.completion_tokens for t in trace.turns)
    return no_token or trace.end_reason.startswith(("BackendError", "ServerUnavailable"))


# Slots of one step's rollouts in rl_rollouts (and their trajectory ids): the generation batch's own
# positions first; a failed slot sampled again on attempt a takes slot a * REDO_SLOTS + position; the
# replacement groups take REPLACEMENT_SLOTS onwards.
REDO_SLOTS = 1_000
REPLACEMENT_SLOTS = 50_000


@dataclass
class _Rollout:
    slot: int
    room: str
    index: int  # sample_index: step * SLOTS + slot
    trajectory_id: str
    reward: float | None = None
    failed: bool = False


class RoomRollouts:
    """TRL prompts (room names) -> real harness episodes, stored and graded; one ``Episode`` each.

    A step's rollouts are exactly those TRL asked for, with three exceptions, all recorded in rl_steps
    and rl_rollouts:
    - a rollout that failed on the server gets no reward (TRL leaves it out of its group's baseline
      and gives it advantage 0); when more than evaluate.max_serving_failed of the step failed, the
      failed slots are sampled again (rl.max_redo times at most), and then the step fails;
    - a flat group (every reward equal: no gradient) is replaced by a group sampled on another room
      of the split whose rewards differ, up to rl.max_replacement_groups per step;
    - before sampling, the weight probe checks that the server's module holds the trainer's weights.
    """

    def __init__(
        self, con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, plan: RLPlan, tokenizer: Any
    ) -> None:
        self.con, self.cfg, self.plan, self.tokenizer = con, cfg, plan, tokenizer
        self.pending: StepStats | None = None

    def __call__(self, prompts: list[Any], trainer: Any) -> list[Episode]:
        from pipeline.trace_store import load_traces

        step = trainer.state.global_step + 1
        policy = step_policy(self.cfg, self.plan, step)
        register_policy(self.con, policy)
        probe = self._probe(policy, trainer, step)
        group = trainer.num_generations
        batch = [self._rollout(policy, step, slot, str(room)) for slot, room in enumerate(prompts)]
        t0 = time.monotonic()
        grade_s = self._sample(policy, batch, trainer)
        n_redone, redo_grade_s = self._redo_failed(policy, step, batch, trainer)
        grade_s += redo_grade_s
        n_groups, n_replaced = self._replace_flat_groups(policy, step, batch, group, trainer)
        rollout_s = time.monotonic() - t0 - grade_s
        self._record(step, batch, trained=True)

        ids = [r.trajectory_id for r in batch]
        scores = rollout_scores(self.con, ids)
        traces = load_traces(self.con, ids, subcalls=False)
        rewards = _rewards(batch)  # failed rollouts have none
        self.pending = StepStats(
            step=step,
            sampling_policy_id=policy.policy_id,
            rewards=[x for x in rewards if x is not None],
            groups=len(batch) // group,
            zero_advantage_share=_zero_advantage_share(rewards, group),
            n_copied=sum(bool(scores.get(t, {}).get("quoted_words")) for t in ids),
            n_over_budget=sum(bool(scores.get(t, {}).get("cut")) for t in ids),
            rollout_s=rollout_s,
            grade_s=grade_s,
            n_rollouts=len(batch),
            n_failed=sum(r.failed for r in batch),
            n_redone=n_redone,
            n_replacement_groups=n_groups,
            n_replaced=n_replaced,
            probe_diff=probe,
        )
        return [
            Episode(
                traces[r.trajectory_id].messages() if r.trajectory_id in traces else [],
                None if r.failed else r.reward,
                turns=traces[r.trajectory_id].turns if r.trajectory_id in traces else [],
            )
            for r in batch
        ]

    def _rollout(self, policy: Policy, step: int, slot: int, room: str) -> _Rollout:
        from pipeline.trace_store import trajectory_id

        index = step * SLOTS + slot
        return _Rollout(slot, room, index, trajectory_id(policy.policy_id, room, PURPOSE, index))

    def _probe(self, policy: Policy, trainer: Any, step: int) -> float | None:
        """The weight probe on the step's module (server generation only), before anything is sampled."""
        tolerance = self.cfg.rl.probe_tolerance
        if self.plan.generation != "server" or tolerance <= 0:
            return None
        from pipeline.policies import serve_policy, served_name
        from pipeline.training.weight_probe import check_probe

        serve_policy(policy, self.cfg)  # a resumed run talks to a server that may not serve the step yet
        model = trainer.accelerator.unwrap_model(trainer.model)
        return check_probe(
            self.cfg.models.root.base_url,
            served_name(policy, self.cfg),
            model,
            self.tokenizer,
            tolerance,
            f"rl step {step}",
        )

    def _sample(self, policy: Policy, rollouts: list[_Rollout], trainer: Any) -> float:
        """Run the rollouts not in the warehouse yet, grade them all, fill in rewards; returns grading seconds."""
        from pipeline.grading.grade_run import grade_reference
        from pipeline.rooms import store
        from pipeline.sampling import Job
        from pipeline.trace_store import load_traces

        ids = [r.trajectory_id for r in rollouts]
        have = self._existing(ids)
        todo = [
            Job(r.room, r.index, r.trajectory_id, bucket(f"{self.cfg.run.seed}|{r.trajectory_id}", 1 << 32))
            for r in rollouts
            if r.trajectory_id not in have
        ]
        if todo:
            loaded = {name: store.load_room(self.con, name) for name in sorted({j.room for j in todo})}
            asyncio.run(self._episodes(policy, todo, loaded, trainer))
        t1 = time.monotonic()
        grade_reference(self.con, self.cfg, only=set(ids))
        scores = rollout_scores(self.con, ids)
        traces = load_traces(self.con, ids, subcalls=False)
        for r in rollouts:
            r.failed = failed_on_server(traces.get(r.trajectory_id))
            rl = self.cfg.rl
            r.reward = reward(
                scores.get(r.trajectory_id, {}), rl.coverage_weight, rl.overlap_weight, rl.cost_weight
            )
        return time.monotonic() - t1

    def _redo_failed(
        self, policy: Policy, step: int, batch: list[_Rollout], trainer: Any
    ) -> tuple[int, float]:
        """Sample the failed slots again while more than evaluate.max_serving_failed of the batch failed
        (rl.max_redo times at most; then the step fails). Returns (rollouts redone, grading seconds)."""
        n_redone, grade_s = 0, 0.0
        for attempt in range(1, self.cfg.rl.max_redo + 2):
            failed = [i for i, r in enumerate(batch) if r.failed]
            if len(failed) <= self.cfg.evaluate.max_serving_failed * len(batch):
                break
            if attempt > self.cfg.rl.max_redo:
                raise RLError(
                    f"rl step {step}: {len(failed)} of {len(batch)} rollouts failed on the root's server after "
                    f"{self.cfg.rl.max_redo} redo(s) (evaluate.max_serving_failed "
                    f"{self.cfg.evaluate.max_serving_failed:g}); the step is not trained on"
                )
            again = [self._rollout(policy, step, attempt * REDO_SLOTS + i, batch[i].room) for i in failed]
            grade_s += self._sample(policy, again, trainer)
            self._record(step, [batch[i] for i in failed], trained=False)
            for i, r in zip(failed, again, strict=True):
                batch[i] = r
            n_redone += len(failed)
        return n_redone, grade_s

    def _replace_flat_groups(
        self, policy: Policy, step: int, batch: list[_Rollout], group: int, trainer: Any
    ) -> tuple[int, int]:
        """Sample groups on other rooms for the batch's flat groups; put those that are not flat in their
        place. Returns (groups drawn, groups replaced)."""
        flat = [g for g in range(len(batch) // group) if _flat(_rewards(batch[g * group : (g + 1) * group]))]
        cap = self.cfg.rl.max_replacement_groups
        if not flat or not cap:
            return 0, 0
        used = {r.room for r in batch}
        others = [room for room in self.plan.rooms if room not in used]
        # Which rooms stand in rotates with the step, so one room is not drawn every time.
        start = (step * 7919) % max(1, len(others))
        rooms = (others[start:] + others[:start])[: min(len(flat), cap)]
        drawn = [
            [self._rollout(policy, step, REPLACEMENT_SLOTS + g * group + i, room) for i in range(group)]
            for g, room in enumerate(rooms)
        ]
        if not drawn:
            return 0, 0
        self._sample(policy, [r for g in drawn for r in g], trainer)
        replaced = 0
        for members in drawn:
            if _flat(_rewards(members)) or replaced == len(flat):
                self._record(step, members, trained=False)
                continue
            g = flat[replaced]
            self._record(step, batch[g * group : (g + 1) * group], trained=False)
            for i, r in enumerate(members):
                batch[g * group + i] = r
            replaced += 1
        return len(drawn), replaced

    def _record(self, step: int, rollouts: list[_Rollout], *, trained: bool) -> None:
        with db.transaction(self.con):
            self.con.executemany(
                "insert into rl_rollouts (rl_id, step, slot, room_id, trajectory_id, reward, trained) "
                "values (?, ?, ?, ?, ?, ?, ?) "
                # A step redone after a kill records what it trains on now.
                "on conflict do update set room_id = excluded.room_id, trajectory_id = excluded.trajectory_id, "
                "reward = excluded.reward, trained = excluded.trained",
                [
                    [
                        self.plan.rl_id,
                        step,
                        r.slot,
                        r.room,
                        r.trajectory_id,
                        None if r.failed else r.reward,
                        trained,
                    ]
                    for r in rollouts
                ],
            )

    def _existing(self, ids: list[str]) -> set[str]:
        rows = self.con.execute(
            "select trajectory_id from trajectories where list_contains(?, trajectory_id)", [ids]
        ).fetchall()
        return {r[0] for r in rows}

    async def _episodes(self, policy: Policy, jobs: list[Any], rooms: dict[str, Any], trainer: Any) -> None:
        """Run ``jobs`` like the sampler does (same harness, sandbox, subagents), each written whole when it ends."""
        from pipeline.llm.base import make_backend
        from pipeline.rooms.probes import ProbeIndex
        from pipeline.sampling import error_trace, export_dir, finished_rows, run_trajectory
        from pipeline.trace_store import TraceWriter

        cfg = self.cfg
        dirs = {name: export_dir(cfg, room) for name, room in rooms.items()}
        indexes = {name: ProbeIndex(room.probes) for name, room in rooms.items()}
        writer = TraceWriter(self.con)
        sub = make_backend(cfg.models.subagent)
        live = None
        if self.plan.generation == "in_process":
            live = LivePolicy(trainer, root_backend_config(policy, cfg), self.tokenizer, policy.policy_id)
            root = live.__enter__()
        else:
            from pipeline.policies import serve_policy

            # A resumed run talks to a server that may not serve this step's module yet.
            serve_policy(policy, cfg)
            backend_cfg = root_backend_config(policy, cfg)
            backend_cfg.return_tokens = True  # the update trains the ids the server sampled
            root = make_backend(backend_cfg)
        gate = asyncio.Semaphore(cfg.sample.concurrency)

        async def one(job: Any) -> None:
            async with gate:
                t0 = time.monotonic()
                try:
                    trace = await run_trajectory(cfg, rooms[job.room], dirs[job.room], root, sub, policy, job)
                except Exception as exc:  # noqa: BLE001 - recorded like the sampler records it
                    trace = error_trace(job, policy, exc, t0)
                writer.add(
                    *finished_rows(trace, rooms[job.room], indexes[job.room], job, policy.policy_id, PURPOSE)
                )
                writer.flush()

        try:
            await asyncio.gather(*(one(j) for j in jobs))
        finally:
            await sub.aclose()
            if live is not None:
                live.__exit__(None, None, None)
            else:
                await root.aclose()


def _rewards(rollouts: list[_Rollout]) -> list[float | None]:
    return [None if r.failed else r.reward for r in rollouts]
