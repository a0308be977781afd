-- Rejection filter: one row per training trajectory with the first rule that
-- rejects it (in funnel order), or 'accepted'. Parameters ($name) come from
-- the recipe's `filter` section; see stages/filter.py. Scores are filter.judge's.
with recursive

lineage(policy_id) as (
    -- the named policy and every policy trained from it, transitively
    select policy_id from policies where policy_id = $policy_lineage
    union
    select p.policy_id from policies as p join lineage as l on p.parent_id = l.policy_id
),

judged as (
    -- the headline and flagged decoys of the judge the filter reads ($judge:
    -- 'reference' or 'llm:<model>'), from the newest grader version it used on
    -- each trajectory; a trajectory that judge never graded is not considered
    select trajectory_id, headline, traps_failed
    from memo_scores
    where judge = $judge
    qualify grader_version = max(grader_version) over (partition by trajectory_id)
),

scores as (
    -- for the reference judge these are trajectory_scores' own score and trap_failures
    select t.* replace (j.headline as score, j.traps_failed as trap_failures)
    from trajectory_scores as t
    join judged as j using (trajectory_id)
    where t.purpose = 'train'
),

room_means as (
    select room_id, avg(score) as room_mean_score from scores group by room_id
),

code as (
    -- what the root wrote, turn by turn: identical programs on one room are duplicates
    select
        trajectory_id,
        md5(string_agg(coalesce(code, ''), chr(10) || '-- turn --' || chr(10) order by turn_index)) as code_hash,
        sum(length(completion) + length(new_messages::varchar)) as root_chars
    from turns
    group by trajectory_id
),

rules as (
    select
        s.trajectory_id,
        s.room_id,
        s.score,
        s.coverage,
        -- what the room's duplicates and top_k are ranked by: the score less its cost ($cost_weight per USD)
        s.score - $cost_weight * coalesce(s.cost_usd, 0) as rank_value,
        coalesce(c.code_hash, md5(s.trajectory_id)) as code_hash,
        case
            -- nothing the root wrote means nothing to train on, whatever the loose filters say
            when c.trajectory_id is null or c.root_chars = 0 then 'no_root_turn'
            when $require_submit and s.status <> 'submitted' then 'not_finished'
            when s.score < $min_score then 'score'
            when $min_relative is not null and s.score < m.room_mean_score + $min_relative then 'score'
            when s.coverage < $min_coverage then 'coverage'
            when $max_trap_failures is not null and s.trap_failures > $max_trap_failures then 'trap'
            when coalesce(c.root_chars, 0) > $max_root_chars then 'too_long'
            when $policy_lineage <> '' and s.policy_id not in (select policy_id from lineage) then 'lineage'
            else 'ok'
        end as rule
    from scores as s
    left join room_means as m using (room_id)
    left join code as c using (trajectory_id)
),

deduplicated as (
    select
        *,
        -- the same code on the same room is the same conversation (subagents and
        -- judge are deterministic given the code); the same code on another
        -- room is a different example and is kept
        row_number() over (
            partition by room_id, code_hash order by rank_value desc, coverage desc, trajectory_id
        ) as dup_rank
    from rules
    where rule = 'ok'
),

ranked as (
    select
        *,
        row_number() over (
            partition by room_id order by rank_value desc, coverage desc, trajectory_id
        ) as room_rank
    from deduplicated
    where dup_rank = 1
),

final as (
    select
        r.trajectory_id,
        case
            when r.rule <> 'ok' then r.rule
            when d.dup_rank > 1 then 'duplicate'
            when $top_k is not null and k.room_rank > $top_k then 'top_k'
            else 'accepted'
        end as reason
    from rules as r
    left join deduplicated as d using (trajectory_id)
    left join ranked as k using (trajectory_id)
)

select * from final order by trajectory_id
