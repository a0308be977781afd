-- Core warehouse: rooms and their contents, policies, trajectories and traces,
-- grades, coverage, selections, datasets, training and evaluation.
-- Long texts are plain VARCHAR columns so every trace stays queryable with SQL.

create table stage_runs (
    run_id varchar primary key,
    stage varchar not null,
    config_hash varchar not null,
    command varchar,             -- command line that started the stage
    started_at timestamp not null,
    ended_at timestamp,
    status varchar not null,     -- running | ok | failed
    counts json,                 -- what the stage did, e.g. {"sampled": 12}
    error varchar
);

create table rooms (
    room_id varchar primary key,
    name varchar not null unique,
    source varchar not null,     -- generated | import | cuad
    split varchar not null,      -- train | heldout
    seed bigint,
    target json not null,        -- name, industry, jurisdiction
    deal json not null,          -- type, price, buyer
    n_documents integer not null,
    n_tokens bigint not null,
    created_at timestamp not null default current_timestamp
);

create table documents (
    room_id varchar not null,
    path varchar not null,       -- unique within the room, e.g. 03_material_contracts/customers/msa.txt
    folder varchar not null,     -- folder path of the document (path without the file name)
    category varchar not null,   -- one of the diligence categories
    title varchar not null,
    doc_kind varchar not null,   -- agreement | amendment | minutes | certificate | letter | schedule | spreadsheet | ...
    text varchar not null,
    n_tokens integer not null,
    primary key (room_id, path)
);

create table criteria (
    room_id varchar not null,
    criterion_id varchar not null,
    kind varchar not null,       -- identify | cite | quantify | connect | absence | next_step | trap
    issue_id varchar,            -- planted issue (or decoy) the criterion belongs to
    issue_kind varchar,
    text varchar not null,       -- what an LLM judge reads
    spec json not null,          -- machine-checkable fields for the reference judge
    is_trap boolean not null,
    primary key (room_id, criterion_id)
);

create table probes (
    room_id varchar not null,
    probe_id integer not null,
    path varchar not null,
    char_offset integer not null,
    text varchar not null,       -- the probe span, anchored at a sentence start
    primary key (room_id, probe_id)
);

create table policies (
    policy_id varchar primary key,   -- stable hash of the fields below
    base_model varchar not null,
    adapter varchar,                 -- adapter folder, null for the base model
    backend varchar not null,
    prompt varchar not null,         -- prompt variant name
    harness varchar not null,        -- rlm | toolloop
    sampling json not null,
    parent_id varchar,               -- policy whose trajectories trained this one
    train_id varchar,
    created_at timestamp not null default current_timestamp
);

create table trajectories (
    trajectory_id varchar primary key,
    room_id varchar not null,
    policy_id varchar not null,
    sample_index integer not null,   -- 0..k-1 within (room, policy, purpose)
    purpose varchar not null,        -- train | eval
    harness varchar not null,
    status varchar not null,         -- submitted | turn_limit | budget | error | timeout
    end_reason varchar,
    memo varchar,
    n_turns integer not null,
    n_subcalls integer not null,
    root_prompt_tokens bigint not null,
    root_completion_tokens bigint not null,
    sub_prompt_tokens bigint not null,
    sub_completion_tokens bigint not null,
    wall_s double not null,
    delegated_chars bigint not null,    -- characters of all subagent prompts
    memo_chars integer not null,
    n_findings integer not null,        -- subagent response lines that report something (not errors, not "no issues")
    n_findings_carried integer not null, -- of those, lines that appear verbatim in the memo
    memo_started_s double,           -- seconds from start when the memo was begun (the start of memo_turn, added in 002)
    last_subcall_returned_s double,
    started_at timestamp not null,
    trace json not null,             -- the whole trace; since 002 only what has no table (pipeline.trace_store)
    unique (room_id, policy_id, purpose, sample_index)
);

create table turns (
    trajectory_id varchar not null,
    turn_index integer not null,
    new_messages json not null,      -- messages appended since the previous turn (the full input is their concatenation)
    completion varchar not null,
    code varchar,
    output varchar,                  -- output shown to the root, after the cut
    error varchar,
    prompt_tokens integer not null,
    completion_tokens integer not null,
    started_s double not null,
    ended_s double not null
    -- no primary key on the high-volume child tables: rows are only ever written
    -- together with their trajectory (whose key is enforced), and index upkeep
    -- would halve ingest speed
);

create table subcalls (
    trajectory_id varchar not null,
    call_index integer not null,
    turn_index integer not null,
    depth integer not null,
    parent_call integer,             -- for depth-2 children: the rlm_query call they belong to
    model varchar not null,
    prompt varchar not null,
    response varchar,
    error varchar,
    prompt_tokens integer not null,
    completion_tokens integer not null,
    latency_s double not null,
    issued_s double not null,        -- seconds from trajectory start
    returned_s double not null
);

create table grades (
    trajectory_id varchar not null,
    criterion_id varchar not null,
    judge varchar not null,          -- reference | llm:<model>
    passed boolean,                  -- null = ungraded (judge failed), never counted
    reason varchar,
    graded_at timestamp not null default current_timestamp
    -- one row per (trajectory, criterion, judge): the grade stage only grades
    -- trajectories that have no rows from that judge, in one transaction each
);

create table judge_cache (
    memo_hash varchar not null,
    criterion_id varchar not null,
    judge varchar not null,
    passed boolean,
    reason varchar,
    primary key (memo_hash, criterion_id, judge)
);

create table coverage (
    trajectory_id varchar not null,
    scope varchar not null,          -- all | root | subagent
    grouping varchar not null,       -- total | folder | category
    group_value varchar not null,    -- '' for total
    n_probes integer not null,
    n_seen integer not null
);

create table selections (
    selection_id varchar not null,
    trajectory_id varchar not null,
    accepted boolean not null,
    reason varchar not null,         -- 'accepted' or the first rule that rejected it
    params json not null,
    created_at timestamp not null default current_timestamp,
    primary key (selection_id, trajectory_id)
);

create table datasets (
    dataset_id varchar primary key,
    selection_id varchar not null,
    version integer not null,
    path varchar not null,
    n_train integer not null,
    n_validation integer not null,
    n_dropped_too_long integer not null,
    card json not null,
    created_at timestamp not null default current_timestamp
);

create table dataset_examples (
    dataset_id varchar not null,
    trajectory_id varchar not null,
    split varchar not null,          -- train | validation | dropped
    n_tokens integer not null,
    primary key (dataset_id, trajectory_id)
);

create table train_runs (
    train_id varchar primary key,
    dataset_id varchar not null,
    parent_policy_id varchar not null,
    policy_id varchar,               -- the policy this run produced
    config_hash varchar not null,
    adapter_path varchar not null,
    status varchar not null,         -- running | ok | failed
    train_tokens bigint,
    train_seconds double,
    final_train_loss double,
    final_eval_loss double,
    started_at timestamp not null,
    ended_at timestamp
);

create table train_logs (
    train_id varchar not null,
    step integer not null,
    epoch double,
    loss double,
    eval_loss double,
    learning_rate double,
    logged_at timestamp not null default current_timestamp,
    primary key (train_id, step)
);

create table evaluations (
    eval_id varchar not null,
    policy_id varchar not null,
    base_policy_id varchar not null,
    metric varchar not null,         -- pass_rate | lift | coverage | finished_rate | pass_rate:<kind> | ...
    value double,
    ci_low double,
    ci_high double,
    n_rooms integer,
    created_at timestamp not null default current_timestamp,
    primary key (eval_id, policy_id, metric)
);

create table nightly_rounds (
    round_id varchar primary key,
    champion_before varchar not null,
    candidate_policy_id varchar,
    promoted boolean,
    lift double,
    lift_ci_low double,
    lift_ci_high double,
    decision varchar not null,       -- promoted | kept_champion | left_champion | lift_withheld | nothing_to_do | running | failed
    started_at timestamp not null,
    ended_at timestamp
);

create table champion (
    singleton integer primary key default 1,
    policy_id varchar not null,
    updated_at timestamp not null default current_timestamp
);
