-- depends_on: stg_trajectories, stg_trajectory_programs
-- Per (room, policy, purpose): how many distinct programs the root wrote. A room's k episodes that
-- repeat one program are fewer than k samples: this is the evaluation's effective sample size.
with

src_trajectories as (
    select trajectory_id, room_id, policy_id, purpose from stg_trajectories
),

src_programs as (
    select * from stg_trajectory_programs
),

final as (
    select
        t.room_id,
        t.policy_id,
        t.purpose,
        count(*) as n_trajectories,
        -- an episode with no turn ran the empty program
        count(distinct coalesce(p.program_md5, md5(''))) as distinct_programs
    from src_trajectories as t
    left join src_programs as p using (trajectory_id)
    group by t.room_id, t.policy_id, t.purpose
)

select * from final
