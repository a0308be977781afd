-- depends_on: trajectory_scores
-- Per (room, policy, purpose): the unit the bootstrap resamples over.
with

scores as (
    select * from trajectory_scores
),

final as (
    select
        room_id,
        policy_id,
        purpose,
        any_value(room_n_documents) as room_n_documents,
        any_value(room_n_tokens) as room_n_tokens,
        count(*) as n_trajectories,
        avg(score) as score,
        max(score) as best_score,
        -- mean score of the episodes that submitted a memo: what the program earned, finishing aside
        avg(score) filter (where finished) as submitted_score,
        avg(recall) as recall,
        avg("precision") as "precision",
        avg(coverage) as coverage,
        avg(finished::int) as finished_rate,
        -- episodes that ended (timeout or error) before the root's server returned one token:
        -- they measure the deployment, not the policy (pipeline.evaluation withholds the lift)
        avg((status in ('timeout', 'error') and coalesce(root_completion_tokens, 0) = 0)::int)
            as serving_failed_rate,
        avg(n_subcalls) as subcalls,
        -- mean USD per trajectory at the prices in model_prices (0 for embedded models)
        avg(cost_usd) as cost_usd
    from scores
    group by room_id, policy_id, purpose
)

select * from final
