-- Trajectories sampled on a room the warehouse does not hold.
with

src_trajectories as (
    select trajectory_id, room_id from trajectories
),

src_rooms as (
    select room_id from rooms
),

final as (
    select t.trajectory_id, t.room_id
    from src_trajectories as t
    anti join src_rooms as r using (room_id)
)

select * from final
