-- depends_on: trajectory_scores, stg_reference_grades, stg_trajectories
-- Reference-judge pass rate per policy, purpose and criterion kind (newest grader version).
with

src_scores as (
    -- the grader version each trajectory's scores come from (its newest)
    select trajectory_id, grader_version from trajectory_scores where graded
),

src_grades as (
    -- a grade whose criterion is unknown has no kind and is left out
    select g.trajectory_id, g.kind, g.passed
    from stg_reference_grades as g
    join src_scores as s on s.trajectory_id = g.trajectory_id and s.grader_version = g.grader_version
    where g.kind is not null
),

src_trajectories as (
    select trajectory_id, policy_id, purpose from stg_trajectories
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
