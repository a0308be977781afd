-- One row per trajectory: rubric scores from the reference judge, coverage,
-- and the behaviour metrics of the reference report. Everything downstream
-- (filter, evaluate, report, queries) reads trajectories through this view.
with

src_trajectories as (
    select * from trajectories
),

src_rooms as (
    select room_id, split, n_documents, n_tokens from rooms
),

src_grades as (
    -- is_trap is copied onto each grade from its criterion when graded (migration 003);
    -- a grade whose criterion is unknown has none and is left out
    select trajectory_id, passed, is_trap
    from grades
    where judge = 'reference' and is_trap is not null
),

src_coverage as (
    select trajectory_id, scope, n_probes, n_seen
    from coverage
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
        t.status = 'submitted' as finished,
        s.trajectory_id is not null as graded,
        coalesce(s.n_criteria, 0) as n_criteria,
        coalesce(s.n_passed, 0) as n_passed,
        -- share of all criteria passed; traps count as passed unless the memo flags the decoy
        s.n_passed / nullif(s.n_criteria, 0) as pass_rate,
        -- share of the non-trap criteria passed
        s.n_issue_passed / nullif(s.n_issue_criteria, 0) as issue_pass_rate,
        coalesce(s.trap_failures, 0) as trap_failures,
        coalesce(c.coverage, 0) as coverage,
        coalesce(c.root_coverage, 0) as root_coverage,
        coalesce(c.subagent_coverage, 0) as subagent_coverage,
        t.n_turns,
        t.n_subcalls,
        t.delegated_chars,
        t.memo_chars,
        -- share of subagent findings that made it into the memo verbatim
        t.n_findings_carried / nullif(t.n_findings, 0) as findings_carried,
        -- the root began its memo in a turn before the one whose subagent call returned last:
        -- it wrote while subagents were still reading (one cell that calls llm_batch and then
        -- submit() composes the memo after every answer is back, so it does not count)
        coalesce(t.memo_turn < t.last_subcall_turn, false) as memo_before_last_return,
        t.root_prompt_tokens + t.root_completion_tokens as root_tokens,
        t.sub_prompt_tokens + t.sub_completion_tokens as subagent_tokens,
        t.wall_s,
        r.split as room_split,
        r.n_documents as room_n_documents,
        r.n_tokens as room_n_tokens
    from src_trajectories as t
    left join scores as s using (trajectory_id)
    left join cov as c using (trajectory_id)
    left join src_rooms as r using (room_id)
)

select * from final
