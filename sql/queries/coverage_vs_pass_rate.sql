-- Coverage vs score (the headline, F1 of recall and precision) by policy:
-- does reading more of the room buy a better memo? One row per policy and
-- coverage decile.
with

scores as (
    select policy_id, purpose, coverage, score from trajectory_scores where graded
),

binned as (
    select *, least(floor(coverage * 10), 9)::int as coverage_decile from scores
),

final as (
    select
        policy_id,
        purpose,
        coverage_decile,
        count(*) as n_trajectories,
        avg(coverage) as mean_coverage,
        avg(score) as mean_score
    from binned
    group by policy_id, purpose, coverage_decile
)

select * from final order by policy_id, purpose, coverage_decile
