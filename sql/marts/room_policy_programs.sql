-- depends_on: stg_trajectories, turns
-- Per (room, policy, purpose): how many distinct programs the root wrote. A room's k episodes that
-- repeat one program are fewer than k samples: this is the evaluation's effective sample size.
with

src_trajectories as (
    select trajectory_id, room_id, policy_id, purpose from stg_trajectories
),

src_programs as (
    -- an episode's program: the code of all its turns, whitespace collapsed
    select trajectory_id, string_agg(regexp_replace(coalesce(code, ''), '\s+', ' ', 'g'), '\n' order by turn_index) as program
    from turns
    group by trajectory_id
),

final as (
    select
        t.room_id,
        t.policy_id,
        t.purpose,
        count(*) as n_trajectories,
        count(distinct md5(coalesce(p.program, ''))) as distinct_programs
    from src_trajectories as t
    left join src_programs as p using (trajectory_id)
    group by t.room_id, t.policy_id, t.purpose
)

select * from final
