-- The program-check ladder on the run's own rooms (pipeline.grading.program_check): each reference
-- root program's score on each room, so a sampled trajectory can be placed on the ladder (the mart
-- trajectory_rungs) and the report can say what the root earned of what the room offers.
create table ladder_scores (
    room_id varchar not null,
    rung varchar not null,               -- a rung of pipeline/grading/ladder.yaml
    rung_index integer not null,         -- 0 = nothing, rising up the ladder
    headline double not null,            -- 0 when the program did not submit
    recall double not null,
    "precision" double not null,
    status varchar not null,             -- the episode's status (submitted, error, budget, ...)
    subagent_tokens bigint not null,     -- prompt + completion tokens the program's subagents used
    grader_version integer not null,
    ladder_hash varchar not null,        -- hash of ladder.yaml: a changed ladder is scored again
    created_at timestamp not null,
    primary key (room_id, rung, grader_version, ladder_hash)
);
