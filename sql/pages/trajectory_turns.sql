-- The root's turns of one trajectory ($trajectory_id), in order.
with

src_turns as (
    select * from turns where trajectory_id = $trajectory_id
),

final as (
    select
        turn_index,
        completion,
        code,
        output,
        error,
        reasoning,
        prompt_tokens,
        completion_tokens,
        started_s,
        ended_s
    from src_turns
)

select * from final
order by turn_index
