-- Base vs SFT score (the headline) per held-out room for the latest evaluation's
-- policies: the paired comparison behind the lift.
with

latest_eval as (
    select eval_id, base_policy_id from evaluations order by created_at desc, eval_id limit 1
),

policies_in_eval as (
    select distinct e.policy_id, e.base_policy_id
    from evaluations as e join latest_eval as l using (eval_id)
),

per_room as (
    select room_id, policy_id, score from room_policy_summary where purpose = 'eval'
),

final as (
    select
        b.room_id,
        b.score as base_score,
        c.policy_id as candidate_policy_id,
        c.score as candidate_score,
        c.score - b.score as paired_difference
    from policies_in_eval as p
    join per_room as b on b.policy_id = p.base_policy_id
    join per_room as c on c.policy_id = p.policy_id and c.room_id = b.room_id
    where p.policy_id <> p.base_policy_id
)

select * from final order by paired_difference desc
