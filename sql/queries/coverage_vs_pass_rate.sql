-- Coverage vs pass rate by policy: does reading more of the room buy a
-- better memo? One row per policy and coverage decile.
with

scores as (
    select policy_id, purpose, coverage, pass_rate from trajectory_scores where graded
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
        avg(pass_rate) as mean_pass_rate
    from binned
    group by policy_id, purpose, coverage_decile
)

select * from final order by policy_id, purpose, coverage_decile
