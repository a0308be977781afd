-- depends_on: trajectory_scores
-- Per policy and purpose (train sampling vs held-out eval): scores, coverage
-- and the behaviour table of the reference report.
with

scores as (
    select * from trajectory_scores
),

final as (
    select
        policy_id,
        purpose,
        count(*) as n_trajectories,
        count(distinct room_id) as n_rooms,
        avg(score) as score,
        avg(recall) as recall,
        avg("precision") as "precision",
        avg(criteria_pass_rate) as criteria_pass_rate,
        avg(memo_cut::int) as memo_cut_rate,
        -- grader versions behind these scores (one, unless a regrade is half done)
        string_agg(distinct grader_version::varchar, ',') as grader_versions,
        avg(coverage) as coverage,
        avg(finished::int) as finished_rate,
        avg(trap_failures) as trap_failures,
        avg(n_subcalls) as subcalls,
        avg(delegated_chars) as delegated_chars,
        avg(memo_chars) as memo_chars,
        avg(findings_carried) as findings_carried,
        -- correlation between delegation and room size across trajectories
        corr(n_subcalls, room_n_documents) as calls_size_corr,
        -- the same against room size in tokens (the report shows both)
        corr(n_subcalls, room_n_tokens) as calls_tokens_corr,
        avg(memo_before_delegation_done::int) as memo_before_delegation_done,
        -- share of the subagent token budget spent, over trajectories that recorded one
        avg(budget_used) as budget_used,
        avg(n_turns) as turns,
        avg(wall_s) as wall_s,
        -- mean USD per trajectory at the prices in model_prices (0 for embedded models)
        avg(scores.cost_usd) as cost_usd,
        sum(scores.cost_usd) as total_cost_usd,
        -- the root's share of all input (prompt) and output (completion) tokens
        sum(root_prompt_tokens) / nullif(sum(root_prompt_tokens + sub_prompt_tokens), 0) as root_share_in,
        sum(root_completion_tokens) / nullif(sum(root_completion_tokens + sub_completion_tokens), 0)
            as root_share_out
    from scores
    group by policy_id, purpose
)

select * from final
