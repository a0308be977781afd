-- How trajectories end, per policy: submitted, turn limit, budget, error,
-- timeout — and the commonest end reasons behind the failures.
with

src as (
    select policy_id, purpose, status, end_reason from trajectories
),

final as (
    select
        policy_id,
        purpose,
        status,
        count(*) as n,
        mode(end_reason) as commonest_reason
    from src
    group by policy_id, purpose, status
)

select * from final order by policy_id, purpose, n desc
