-- Trajectory scores outside [0, 1]: every one is a share or an F1 of shares.
with

scores as (
    select
        trajectory_id,
        score,
        recall,
        "precision",
        criteria_pass_rate,
        coverage,
        root_coverage,
        subagent_coverage,
        findings_carried
    from trajectory_scores
),

unpivoted as (
    unpivot scores
    on score, recall, "precision", criteria_pass_rate, coverage, root_coverage, subagent_coverage, findings_carried
    into name metric value value
),

final as (
    select trajectory_id, metric, value
    from unpivoted
    where value < 0 or value > 1
)

select * from final
