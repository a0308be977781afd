-- The trajectories an evaluation reads, and how they were sampled (pipeline.evaluation).
-- An evaluation samples fresh sample indices for every policy it compares (the same indices, so the
-- same seeds, for all of them), in blocks of rooms: each block in its own server session when the
-- command started the servers, the policies in a random order within each block. Its figures in
-- `evaluations` come from these rows and no others: an evaluation is never topped up from another.
create table eval_trajectories (
    eval_id varchar not null,
    trajectory_id varchar not null,
    policy_id varchar not null,
    room_id varchar not null,
    sample_index integer not null,
    block integer not null,          -- 0-based block of rooms
    block_position integer not null, -- the policy's place in its block's random order (0 = first)
    session_id varchar,              -- the server session it was sampled in (NULL: servers not started by the command)
    primary key (eval_id, trajectory_id)
);
