-- Does delegation scale with the room? Subagent calls vs room size per
-- policy, with the correlation the reference report tracks (0.17 → 0.84).
with

scores as (
    select policy_id, purpose, room_id, room_n_documents, room_n_tokens, n_subcalls from trajectory_scores
),

final as (
    select
        policy_id,
        purpose,
        count(*) as n_trajectories,
        avg(n_subcalls) as mean_subcalls,
        corr(n_subcalls, room_n_documents) as corr_calls_documents,
        corr(n_subcalls, room_n_tokens) as corr_calls_tokens
    from scores
    group by policy_id, purpose
)

select * from final order by policy_id, purpose
