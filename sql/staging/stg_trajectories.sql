-- depends_on: trajectories
-- One row per sampled trajectory with the per-row measures every mart reads;
-- the trace, memo and timings stay in the raw table.
with

source as (
    select * from trajectories
),

final as (
    select
        trajectory_id,
        room_id,
        policy_id,
        purpose,
        harness,
        sample_index,
        status,
        status = 'submitted' as finished,
        n_turns,
        n_subcalls,
        delegated_chars,
        memo_chars,
        -- share of subagent findings that reached the memo (a plain line verbatim, a structured one by its summary or quote)
        n_findings_carried / nullif(n_findings, 0) as findings_carried,
        -- the root began its memo while subagents were still reading: in a turn before the one that
        -- issued the call that returned last, or (llm_batch_async) in a later turn that started before
        -- that call was back (one cell that calls llm_batch and then submit() composes the memo after
        -- every answer is back, so it does not count)
        coalesce(memo_turn < last_subcall_turn, false)
        or coalesce(memo_turn > last_subcall_turn and memo_turn_started_s < last_subcall_returned_s, false)
            as memo_before_delegation_done,
        root_prompt_tokens + root_completion_tokens as root_tokens,
        sub_prompt_tokens + sub_completion_tokens as subagent_tokens,
        -- share of the subagent token budget spent (null where no budget was recorded)
        (sub_prompt_tokens + sub_completion_tokens) / nullif(subagent_budget_tokens, 0) as budget_used,
        wall_s
    from source
)

select * from final
