-- Grades that are not unique per trajectory x criterion x judge x grader version:
-- the grade stage writes one row per criterion for each (judge, grader version),
-- and a duplicate would count twice in every score.
with

src_grades as (
    select trajectory_id, criterion_id, judge, grader_version from grades
),

final as (
    select trajectory_id, criterion_id, judge, grader_version, count(*) as n_rows
    from src_grades
    group by trajectory_id, criterion_id, judge, grader_version
    having count(*) > 1
)

select * from final
