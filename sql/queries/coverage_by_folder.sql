-- Which folders do the models read? Mean coverage per policy and folder,
-- split into what the root saw itself and what it delegated.
with

cov as (
    select c.trajectory_id, c.scope, c.group_value as folder, c.n_seen, c.n_probes
    from coverage as c
    where c.grouping = 'folder'
),

traj as (
    select trajectory_id, policy_id, purpose from trajectories
),

final as (
    select
        t.policy_id,
        t.purpose,
        c.folder,
        c.scope,
        sum(c.n_seen) / nullif(sum(c.n_probes), 0) as coverage
    from cov as c join traj as t using (trajectory_id)
    group by t.policy_id, t.purpose, c.folder, c.scope
)

select * from final order by policy_id, purpose, folder, scope
