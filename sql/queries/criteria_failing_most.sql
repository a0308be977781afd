-- Which rubric criteria fail most on held-out rooms (reference judge)?
-- Read: the criteria the models miss; kind tells whether it is citing,
-- quantifying, connecting documents or noting an absence that is hard.
with

eval_trajectories as (
    select trajectory_id, room_id, policy_id from trajectories where purpose = 'eval'
),

grades_ref as (
    select trajectory_id, criterion_id, passed from grades where judge = 'reference'
),

final as (
    select
        t.room_id,
        g.criterion_id,
        c.kind,
        c.issue_kind,
        count(*) as n_grades,
        avg((not g.passed)::int) as fail_rate,
        any_value(c.text) as criterion_text
    from grades_ref as g
    join eval_trajectories as t using (trajectory_id)
    join criteria as c on c.room_id = t.room_id and c.criterion_id = g.criterion_id
    group by t.room_id, g.criterion_id, c.kind, c.issue_kind
)

select * from final order by fail_rate desc, n_grades desc limit 50
