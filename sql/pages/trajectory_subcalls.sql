-- The subagent calls of one trajectory ($trajectory_id), in the order the root issued them.
with

src_subcalls as (
    select * from subcalls where trajectory_id = $trajectory_id
),

final as (
    select
        call_index,
        turn_index,
        depth,
        parent_call,
        model,
        prompt,
        response,
        error,
        prompt_tokens,
        completion_tokens,
        latency_s,
        issued_s,
        returned_s
    from src_subcalls
)

select * from final
order by call_index
