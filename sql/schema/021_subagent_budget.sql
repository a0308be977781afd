-- The subagent token budget each trajectory ran under (pipeline.harness.subagents.room_budgets:
-- harness.max_subcall_tokens, or harness.budget_share of the room's tokens), so a mart can report the
-- share of it the root spent. Null for rows written before 021 and for harnesses without a budget.
alter table trajectories add column subagent_budget_tokens bigint;
