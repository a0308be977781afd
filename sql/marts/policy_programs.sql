-- depends_on: stg_trajectories, stg_trajectory_programs
-- Per (policy, purpose): how many distinct programs the root wrote over all its episodes. With one
-- seed per room (the default evaluation) every room holds one program, so this is what tells a
-- policy that writes one program everywhere from one that adapts it to each room.
with

src_trajectories as (
    select trajectory_id, policy_id, purpose from stg_trajectories
),

src_programs as (
    select * from stg_trajectory_programs
),

final as (
    select
        t.policy_id,
        t.purpose,
        count(*) as n_trajectories,
        -- an episode with no turn ran the empty program
        count(distinct coalesce(p.program_md5, md5(''))) as distinct_programs
    from src_trajectories as t
    left join src_programs as p using (trajectory_id)
    group by t.policy_id, t.purpose
)

select * from final
