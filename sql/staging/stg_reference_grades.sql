-- depends_on: grades
-- The reference judge's per-criterion grades, every grader version (each mart
-- picks the version it reports). kind and is_trap are copied onto each grade
-- from its criterion when graded (migration 003); both are null when the
-- criterion was unknown.
with

source as (
    select * from grades
),

final as (
    select
        trajectory_id,
        criterion_id,
        grader_version,
        kind,
        is_trap,
        -- null = ungraded (the judge failed), never counted as passed or failed
        passed
    from source
    where judge = 'reference'
)

select * from final
