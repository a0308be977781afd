-- depends_on: selections, trajectories
-- One row per (selection, trajectory) with the trajectory's room: reason is
-- 'accepted' or the first filter rule that rejected it, in funnel order.
with

source as (
    select * from selections
),

src_trajectories as (
    select trajectory_id, room_id from trajectories
),

final as (
    select
        s.selection_id,
        s.trajectory_id,
        s.accepted,
        s.reason,
        t.room_id
    from source as s
    join src_trajectories as t using (trajectory_id)
)

select * from final
