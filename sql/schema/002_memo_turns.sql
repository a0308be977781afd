-- Turn indices behind "did the root begin its memo before its last subagent
-- call returned": comparing times alone cannot tell a memo written while
-- subagents were still reading from one program that calls llm_batch and then
-- submit() in the same cell. Since this migration `trajectories.trace` holds
-- only the parts of a trace that have no table (room name, usage, depth-2
-- children); turns and subagent calls are read back from their tables
-- (pipeline.trace_store.load_traces). Older rows keep their whole trace.

alter table trajectories add column memo_turn integer;          -- first root turn whose completion holds a line of the memo (else the turn that submitted)
alter table trajectories add column last_subcall_turn integer;  -- root turn that issued the subagent call which returned last

-- Backfill rows written before: the memo counted as begun in the last turn.
update trajectories
set memo_turn = case when memo is not null and n_turns > 0 then n_turns - 1 end;

update trajectories as t
set last_subcall_turn = s.turn_index
from (
    select trajectory_id, arg_max(turn_index, returned_s) as turn_index
    from subcalls
    group by trajectory_id
) as s
where s.trajectory_id = t.trajectory_id;

-- The trace JSON and the turns' messages are written by the project's own
-- serializer (orjson), so they are stored as VARCHAR: validating them again
-- on every insert cost about a fifth of bulk ingest time. DuckDB's json
-- functions (->, ->>, json_extract) read VARCHAR as they read JSON.
alter table trajectories alter column trace type varchar;
alter table turns alter column new_messages type varchar;
