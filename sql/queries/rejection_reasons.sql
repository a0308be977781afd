-- Why the newest selection rejected trajectories, per room: where does the
-- funnel lose its candidates?
with

latest as (
    select selection_id from selections order by created_at desc limit 1
),

src as (
    select s.reason, t.room_id
    from selections as s
    join latest as l using (selection_id)
    join trajectories as t using (trajectory_id)
),

final as (
    select room_id, reason, count(*) as n from src group by room_id, reason
)

select * from final order by room_id, n desc
