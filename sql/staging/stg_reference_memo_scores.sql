-- depends_on: memo_scores
-- The reference judge's memo scores from the newest grader version that graded
-- each trajectory: at most one row per trajectory. Regrading keeps older
-- versions' rows, which stay queryable in memo_scores.
with

source as (
    select * from memo_scores
),

final as (
    select *
    from source
    where judge = 'reference'
    qualify grader_version = max(grader_version) over (partition by trajectory_id)
)

select * from final
