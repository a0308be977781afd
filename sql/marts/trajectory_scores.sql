-- depends_on: stg_trajectories, stg_rooms, stg_reference_memo_scores, stg_reference_grades, stg_coverage
-- depends_on: stg_trajectory_cost
-- One row per trajectory: scores from the reference judge (its newest grader
-- version for the trajectory), coverage,
-- and the behaviour metrics of the reference report. Everything downstream
-- (filter, evaluate, report, queries) reads trajectories through this view.
with

src_trajectories as (
    select * from stg_trajectories
),

src_rooms as (
    select room_id, split, n_documents, n_tokens from stg_rooms
),

src_memo_scores as (
    select * from stg_reference_memo_scores
),

src_grades as (
    -- a grade whose criterion is unknown has no is_trap and is left out;
    -- a trajectory's newest grader version only (older rows stay after a regrade)
    select trajectory_id, passed, is_trap
    from stg_reference_grades
    where is_trap is not null
    qualify grader_version = max(grader_version) over (partition by trajectory_id)
),

src_cost as (
    select * from stg_trajectory_cost
),

src_coverage as (
    select trajectory_id, scope, n_probes, n_seen
    from stg_coverage
    where grouping = 'total'
),

scores as (
    select
        trajectory_id,
        count(*) as n_criteria,
        count(*) filter (where passed) as n_passed,
        count(*) filter (where is_trap) as n_traps,
        count(*) filter (where is_trap and not passed) as trap_failures,
        count(*) filter (where not is_trap) as n_issue_criteria,
        count(*) filter (where not is_trap and passed) as n_issue_passed
    from src_grades
    group by trajectory_id
),

cov as (
    select
        trajectory_id,
        max(n_seen / nullif(n_probes, 0)) filter (where scope = 'all') as coverage,
        max(n_seen / nullif(n_probes, 0)) filter (where scope = 'root') as root_coverage,
        max(n_seen / nullif(n_probes, 0)) filter (where scope = 'subagent') as subagent_coverage
    from src_coverage
    group by trajectory_id
),

final as (
    select
        t.trajectory_id,
        t.room_id,
        t.policy_id,
        t.purpose,
        t.harness,
        t.sample_index,
        t.status,
        t.finished,
        m.trajectory_id is not null as graded,
        coalesce(s.n_criteria, 0) as n_criteria,
        coalesce(s.n_passed, 0) as n_passed,
        -- the headline every stage ranks by: F1 of recall and precision (pipeline.grading.reference)
        m.headline as score,
        -- share of the non-trap criteria passed
        m.recall,
        -- claims the room supports, above chance; 1 when the memo claims nothing
        m."precision",
        m.n_claims,
        m.n_false_claims,
        m.grader_version,
        -- the memo ran past the reading budget and was graded on its first budget_words words
        m.cut as memo_cut,
        m.quoted_words,
        -- share of all criteria passed, traps counted as passed unless flagged (grader version 1's headline)
        s.n_passed / nullif(s.n_criteria, 0) as criteria_pass_rate,
        coalesce(s.trap_failures, 0) as trap_failures,
        coalesce(c.coverage, 0) as coverage,
        coalesce(c.root_coverage, 0) as root_coverage,
        coalesce(c.subagent_coverage, 0) as subagent_coverage,
        t.n_turns,
        t.n_subcalls,
        t.delegated_chars,
        t.memo_chars,
        -- share of subagent findings that reached the memo (stg_trajectories)
        t.findings_carried,
        -- the root began its memo while subagents were still reading (stg_trajectories)
        t.memo_before_delegation_done,
        t.root_tokens,
        t.subagent_tokens,
        t.budget_used,
        t.wall_s,
        r.split as room_split,
        r.n_documents as room_n_documents,
        r.n_tokens as room_n_tokens,
        -- tokens by role, input (prompt) and output (completion), for the root's share of each
        k.root_prompt_tokens,
        k.root_completion_tokens,
        k.sub_prompt_tokens,
        k.sub_completion_tokens,
        -- USD at the prices in model_prices (0 for the embedded models; see stg_trajectory_cost)
        k.root_cost_usd,
        k.subagent_cost_usd,
        k.root_cost_usd + k.subagent_cost_usd as cost_usd
    from src_trajectories as t
    left join src_memo_scores as m using (trajectory_id)
    left join scores as s using (trajectory_id)
    left join cov as c using (trajectory_id)
    left join src_rooms as r using (room_id)
    left join src_cost as k using (trajectory_id)
)

select * from final
