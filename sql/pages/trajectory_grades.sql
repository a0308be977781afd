-- Every verdict on one trajectory's memo ($trajectory_id): the reference
-- judge's newest grader version (the one its score rests on) and any LLM
-- judge's, with the criterion's text.
with

src_grades as (
    select * from grades where trajectory_id = $trajectory_id
),

src_trajectory as (
    select trajectory_id, room_id from trajectories where trajectory_id = $trajectory_id
),

src_criteria as (
    select room_id, criterion_id, kind, issue_id, issue_kind, text, is_trap from criteria
),

newest as (
    select *
    from src_grades
    qualify grader_version = max(grader_version) over (partition by judge)
),

final as (
    select
        g.judge,
        g.criterion_id,
        c.kind,
        c.issue_id,
        c.text,
        c.is_trap,
        g.passed,
        -- the judge's own words: the reference judge names the memo unit that passed or came closest
        g.reason,
        g.grader_version
    from newest as g
    join src_trajectory as t using (trajectory_id)
    left join src_criteria as c on c.room_id = t.room_id and c.criterion_id = g.criterion_id
)

select * from final
order by judge = 'reference' desc, judge, is_trap, passed desc, criterion_id
