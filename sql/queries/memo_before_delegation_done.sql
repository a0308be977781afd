-- Did the root start writing its memo before its last subagent call came
-- back? (A sign it summarised without reading everything it asked for.)
with

scores as (
    select policy_id, purpose, memo_before_last_return, finished, pass_rate from trajectory_scores
),

final as (
    select
        policy_id,
        purpose,
        memo_before_last_return,
        count(*) as n,
        avg(pass_rate) as mean_pass_rate
    from scores
    where finished
    group by policy_id, purpose, memo_before_last_return
)

select * from final order by policy_id, purpose, memo_before_last_return
