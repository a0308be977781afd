-- The sample key (room, policy, purpose, sample_index) is enforced through the
-- primary key alone: a trajectory's id is derived from that key
-- (pipeline.trace_store.trajectory_id, 't-' + 16 hex digits of its SHA-256)
-- and the writer refuses a trajectory whose id is not, so two rows with one
-- key would share an id and violate the primary key. The separate unique index
-- on the key cost about a fifth of DuckDB's time in a bulk flush (measured by
-- tests/bench/bench_warehouse.py). DuckDB cannot drop a constraint in place,
-- so the table is rebuilt; every existing row was written under the unique
-- constraint and keeps its id.

create table trajectories_004 (
    trajectory_id varchar primary key,   -- trajectory_id(policy_id, room_id, purpose, sample_index)
    room_id varchar not null,
    policy_id varchar not null,
    sample_index integer not null,       -- 0..k-1 within (room, policy, purpose)
    purpose varchar not null,            -- train | eval
    harness varchar not null,
    status varchar not null,             -- submitted | turn_limit | budget | error | timeout
    end_reason varchar,
    memo varchar,
    n_turns integer not null,
    n_subcalls integer not null,
    root_prompt_tokens bigint not null,
    root_completion_tokens bigint not null,
    sub_prompt_tokens bigint not null,
    sub_completion_tokens bigint not null,
    wall_s double not null,
    delegated_chars bigint not null,     -- characters of all subagent prompts
    memo_chars integer not null,
    n_findings integer not null,         -- subagent response lines that report something
    n_findings_carried integer not null, -- of those, lines that appear verbatim in the memo
    memo_started_s double,               -- seconds from start when memo_turn began
    last_subcall_returned_s double,
    started_at timestamp not null,
    trace varchar not null,              -- what of the trace has no table (pipeline.trace_store)
    memo_turn integer,                   -- first root turn whose completion holds a line of the memo
    last_subcall_turn integer            -- root turn that issued the subagent call which returned last
);

insert into trajectories_004 by name select * from trajectories;
drop table trajectories;
alter table trajectories_004 rename to trajectories;
