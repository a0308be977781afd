-- Child rows whose trajectory does not exist: turns, subagent calls, grades,
-- memo scores and coverage are only ever written together with their
-- trajectory, in one transaction.
with

children as (
    select 'turns' as child_table, trajectory_id from turns
    union all
    select 'subcalls' as child_table, trajectory_id from subcalls
    union all
    select 'grades' as child_table, trajectory_id from grades
    union all
    select 'memo_scores' as child_table, trajectory_id from memo_scores
    union all
    select 'coverage' as child_table, trajectory_id from coverage
),

src_trajectories as (
    select trajectory_id from trajectories
),

final as (
    select distinct c.child_table, c.trajectory_id
    from children as c
    anti join src_trajectories as t using (trajectory_id)
)

select * from final
