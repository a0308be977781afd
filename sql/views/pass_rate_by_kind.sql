-- Reference-judge pass rate per policy, purpose and criterion kind.
with

src_grades as (
    -- kind is copied onto each grade from its criterion when graded (migration 003)
    select trajectory_id, kind, passed
    from grades
    where judge = 'reference' and kind is not null
),

src_trajectories as (
    select trajectory_id, policy_id, purpose from trajectories
),

final as (
    select
        t.policy_id,
        t.purpose,
        g.kind,
        count(*) as n_grades,
        avg(g.passed::int) as pass_rate
    from src_grades as g
    join src_trajectories as t using (trajectory_id)
    group by t.policy_id, t.purpose, g.kind
)

select * from final
