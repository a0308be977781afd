-- GRPO on the root (pipeline.training.rl): one row per RL run, per optimiser
-- step and per rollout. A rollout is an ordinary trajectory (purpose 'rl');
-- rl_rollouts says which run, step and slot of the step's generation batch it
-- filled, so a resumed run finds the rollouts of an unfinished step instead of
-- sampling them again.
create table rl_runs (
    rl_id varchar primary key,           -- hash of the start policy, the rl config and the seed
    start_policy_id varchar not null,
    policy_id varchar,                   -- the trained adapter as a policy, once finished
    config_hash varchar not null,
    generation varchar not null,         -- in_process | server
    adapter_path varchar not null,       -- relative to run.dir
    status varchar not null,             -- running | ok | failed
    started_at timestamp not null,
    ended_at timestamp
);

create table rl_steps (
    rl_id varchar not null,
    step integer not null,               -- 1-based optimiser step
    sampling_policy_id varchar not null, -- the policy whose weights sampled this step's rollouts
    n_rollouts integer not null,
    reward_mean double,
    reward_std double,
    reward_min double,
    reward_max double,
    zero_advantage_share double,         -- share of groups whose rewards are all equal (no learning signal)
    loss double,
    kl double,                           -- only when rl.beta > 0
    grad_norm double,
    tokens bigint,                       -- prompt + completion tokens of the step's rollouts
    trained_tokens bigint,               -- tokens the root wrote (env_mask = 1)
    n_copied integer,                    -- rollouts whose memo the reference judge cut as copied from the room
    n_over_budget integer,               -- rollouts whose memo ran past the reading budget
    rollout_s double,                    -- wall time of the step's episodes (generation + REPL + subagents)
    grade_s double,
    sync_s double,                       -- saving the adapter and loading it into the server
    update_s double,                     -- forward/backward/optimiser
    finished_at timestamp not null,
    primary key (rl_id, step)
);

create table rl_rollouts (
    rl_id varchar not null,
    step integer not null,
    slot integer not null,               -- position in the step's generation batch (groups are consecutive)
    room_id varchar not null,
    trajectory_id varchar not null,
    reward double,
    primary key (rl_id, step, slot)
);
