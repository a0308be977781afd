-- Probe coverage of one trajectory ($trajectory_id) by folder: share of each
-- folder's probes that reached any model (all), the root (root) or a subagent.
with

src_coverage as (
    select * from coverage where trajectory_id = $trajectory_id and grouping = 'folder'
),

final as (
    select
        group_value as folder,
        scope,
        n_probes,
        n_seen,
        n_seen / nullif(n_probes, 0) as share
    from src_coverage
)

select * from final
order by folder, scope
