-- Reference-judge pass rate per policy, purpose and criterion kind.
with

src_grades as (
    select trajectory_id, criterion_id, passed from grades where judge = 'reference'
),

src_trajectories as (
    select trajectory_id, room_id, policy_id, purpose from trajectories
),

src_criteria as (
    select room_id, criterion_id, kind from criteria
),

final as (
    select
        t.policy_id,
        t.purpose,
        c.kind,
        count(*) as n_grades,
        avg(g.passed::int) as pass_rate
    from src_grades as g
    join src_trajectories as t using (trajectory_id)
    join src_criteria as c on c.room_id = t.room_id and c.criterion_id = g.criterion_id
    group by t.policy_id, t.purpose, c.kind
)

select * from final
