-- depends_on: trajectory_scores, stg_trajectories, ladder_scores
-- Each graded trajectory placed on its room's program-check ladder: the highest rung whose reference
-- program scored at most what the trajectory scored (newest grader version, newest ladder of the room).
-- A trajectory below every rung (a failed episode) has rung 'below nothing' and rung_index null.
with

src_scores as (
    select trajectory_id, grader_version, score as headline from trajectory_scores where graded
),

src_trajectories as (
    select trajectory_id, room_id, policy_id, purpose from stg_trajectories
),

src_ladder as (
    -- the newest ladder scored on each room under each grader version
    select room_id, grader_version, rung, rung_index, headline
    from ladder_scores
    qualify ladder_hash = first_value(ladder_hash) over (
        partition by room_id, grader_version order by created_at desc
    )
),

placed as (
    select
        s.trajectory_id,
        t.room_id,
        s.grader_version,
        max(l.rung_index) filter (where l.headline <= s.headline + 1e-9) as rung_index
    from src_scores as s
    join src_trajectories as t using (trajectory_id)
    join src_ladder as l on l.room_id = t.room_id and l.grader_version = s.grader_version
    group by s.trajectory_id, t.room_id, s.grader_version
),

final as (
    select
        t.trajectory_id,
        t.room_id,
        t.policy_id,
        t.purpose,
        s.headline,
        p.rung_index,
        coalesce(l.rung, 'below nothing') as rung
    from placed as p
    join src_trajectories as t using (trajectory_id)
    join src_scores as s using (trajectory_id)
    left join src_ladder as l
        on l.room_id = p.room_id and l.grader_version = p.grader_version and l.rung_index = p.rung_index
)

select * from final
