-- Trajectories with more than one row in trajectory_scores (or in the newest
-- reference memo scores it joins): a join that fans out would weigh them twice
-- in every summary.
with

scores as (
    select trajectory_id, 'trajectory_scores' as model from trajectory_scores
    union all
    select trajectory_id, 'stg_reference_memo_scores' as model from stg_reference_memo_scores
),

final as (
    select model, trajectory_id, count(*) as n_rows
    from scores
    group by model, trajectory_id
    having count(*) > 1
)

select * from final
