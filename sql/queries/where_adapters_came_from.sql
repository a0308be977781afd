-- Where did each adapter come from? Every trained policy with its train run,
-- dataset, selection and the rooms and policies of the trajectories it
-- learnt from (the one-query form of `python -m pipeline lineage <policy>`).
with

policies_trained as (
    select policy_id, parent_id, train_id, adapter from policies where train_id is not null
),

runs as (
    select train_id, dataset_id, config_hash as train_config_hash, final_train_loss from train_runs
),

datasets_used as (
    select dataset_id, selection_id, version as dataset_version, n_train, n_validation from datasets
),

accepted as (
    select s.selection_id, t.room_id, t.policy_id as sampled_by
    from selections as s
    join trajectories as t using (trajectory_id)
    where s.accepted
),

accepted_by_selection as (
    select
        selection_id,
        count(*) as n_accepted,
        count(distinct room_id) as n_rooms,
        -- the policies that sampled the accepted trajectories
        string_agg(distinct sampled_by, ', ') as sampled_by
    from accepted
    group by selection_id
),

final as (
    select
        p.policy_id,
        p.adapter,
        p.parent_id,
        r.train_id,
        r.train_config_hash,
        d.dataset_id,
        d.dataset_version,
        d.n_train,
        d.n_validation,
        d.selection_id,
        a.n_accepted,
        a.n_rooms,
        a.sampled_by
    from policies_trained as p
    left join runs as r using (train_id)
    left join datasets_used as d using (dataset_id)
    left join accepted_by_selection as a using (selection_id)
)

select * from final order by policy_id
