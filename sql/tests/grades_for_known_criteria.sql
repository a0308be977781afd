-- Grades for a criterion that is not in the rubric of the trajectory's room
-- (a room's rubric never changes once stored, so every grade has one).
with

src_grades as (
    select distinct trajectory_id, criterion_id from grades
),

src_trajectories as (
    select trajectory_id, room_id from trajectories
),

src_criteria as (
    select room_id, criterion_id from criteria
),

final as (
    select g.trajectory_id, t.room_id, g.criterion_id
    from src_grades as g
    join src_trajectories as t using (trajectory_id)
    anti join src_criteria as c on c.room_id = t.room_id and c.criterion_id = g.criterion_id
)

select * from final
