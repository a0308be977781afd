-- Why the current selection (the output of the newest finished filter run)
-- rejected trajectories, per room: where does the funnel lose its candidates?
with

filter_outputs as (
    select l.id as selection_id, r.ended_at
    from lineage as l
    join stage_runs as r using (run_id)
    where l.stage = 'filter' and l.kind = 'selection' and l.role = 'output' and r.status = 'ok'
),

current_selection as (
    select selection_id from filter_outputs order by ended_at desc limit 1
),

src as (
    select s.reason, t.room_id
    from selections as s
    join current_selection as c using (selection_id)
    join trajectories as t using (trajectory_id)
),

final as (
    select room_id, reason, count(*) as n from src group by room_id, reason
)

select * from final order by room_id, n desc
