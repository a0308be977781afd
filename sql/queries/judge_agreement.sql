-- Agreement between the reference judge and each LLM judge, per criterion kind
-- (and over all kinds, kind = 'all'), on the (trajectory, criterion) pairs both
-- judges graded. Ungraded verdicts (passed is null) are left out of n, the
-- agreement rate and kappa, and counted in n_ungraded instead.

with

grades as (
    select trajectory_id, criterion_id, judge, passed from grades
),

trajectories as (
    select trajectory_id, room_id from trajectories
),

criteria as (
    select room_id, criterion_id, kind from criteria
),

reference_grades as (
    select trajectory_id, criterion_id, passed
    from grades
    where judge = 'reference'
),

llm_grades as (
    select trajectory_id, criterion_id, judge, passed
    from grades
    where judge like 'llm:%'
),

paired as (
    select
        llm.judge as llm_judge,
        criteria.kind,
        ref.passed as reference_passed,
        llm.passed as llm_passed,
        -- both judges gave a verdict: the pair counts toward agreement and kappa
        (ref.passed is not null and llm.passed is not null) as both_graded
    from reference_grades as ref
    inner join llm_grades as llm
        on llm.trajectory_id = ref.trajectory_id
        and llm.criterion_id = ref.criterion_id
    inner join trajectories
        on trajectories.trajectory_id = ref.trajectory_id
    inner join criteria
        on criteria.room_id = trajectories.room_id
        and criteria.criterion_id = ref.criterion_id
),

counted as (
    select
        llm_judge,
        case when grouping(kind) = 1 then 'all' else kind end as kind,
        count(*) filter (where both_graded) as n,
        -- pairs where either judge gave no verdict
        count(*) filter (where not both_graded) as n_ungraded,
        avg(case when reference_passed = llm_passed then 1.0 else 0.0 end) filter (where both_graded) as agreement,
        avg(case when reference_passed then 1.0 else 0.0 end) filter (where both_graded) as reference_pass_rate,
        avg(case when llm_passed then 1.0 else 0.0 end) filter (where both_graded) as llm_pass_rate
    from paired
    group by grouping sets ((llm_judge, kind), (llm_judge))
),

with_chance as (
    select
        *,
        -- agreement expected by chance from the two judges' pass rates
        reference_pass_rate * llm_pass_rate + (1 - reference_pass_rate) * (1 - llm_pass_rate) as chance_agreement
    from counted
),

final as (
    select
        llm_judge,
        kind,
        n,
        n_ungraded,
        agreement,
        reference_pass_rate,
        llm_pass_rate,
        chance_agreement,
        -- Cohen's kappa; null when n = 0 or chance agreement is 1 (both judges gave one label to everything)
        case
            when n = 0 or chance_agreement >= 1 then null
            else (agreement - chance_agreement) / (1 - chance_agreement)
        end as kappa
    from with_chance
)

select * from final
order by llm_judge, kind = 'all', kind
