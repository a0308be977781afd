-- Lineage: what each command consumed and made, by id (never "the newest").
-- One row per (stage run, role, kind, id); a stage run's outputs count only
-- when its stage_runs row finished ok, so a failed run never becomes current.
create table lineage (
    run_id varchar not null,         -- stage_runs.run_id of the step
    stage varchar not null,          -- filter | dataset | train | evaluate | sample | rl ...
    role varchar not null,           -- input | output
    kind varchar not null,           -- selection | dataset | train_run | policy | evaluation | room
    id varchar not null,
    created_at timestamp not null,
    primary key (run_id, role, kind, id)
);
