-- Did the root start writing its memo before its last subagent call came
-- back? (A sign it summarised without reading everything it asked for.)
with

scores as (
    select policy_id, purpose, memo_before_delegation_done, finished, score from trajectory_scores
),

final as (
    select
        policy_id,
        purpose,
        memo_before_delegation_done,
        count(*) as n,
        avg(score) as mean_score
    from scores
    where finished
    group by policy_id, purpose, memo_before_delegation_done
)

select * from final order by policy_id, purpose, memo_before_delegation_done
