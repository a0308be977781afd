-- depends_on: stg_trajectories, turns
-- Per (policy, purpose): how many distinct programs the root wrote over all its episodes. With one
-- seed per room (the default evaluation) every room holds one program, so this is what tells a
-- policy that writes one program everywhere from one that adapts it to each room.
with

src_trajectories as (
    select trajectory_id, policy_id, purpose from stg_trajectories
),

src_programs as (
    -- an episode's program: the code of all its turns, whitespace collapsed (as room_policy_programs)
    select trajectory_id, string_agg(regexp_replace(coalesce(code, ''), '\s+', ' ', 'g'), '\n' order by turn_index) as program
    from turns
    group by trajectory_id
),

final as (
    select
        t.policy_id,
        t.purpose,
        count(*) as n_trajectories,
        count(distinct md5(coalesce(p.program, ''))) as distinct_programs
    from src_trajectories as t
    left join src_programs as p using (trajectory_id)
    group by t.policy_id, t.purpose
)

select * from final
