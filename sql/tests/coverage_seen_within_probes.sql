-- Coverage rows that saw more probes than there are, or counted below zero.
with

src_coverage as (
    select trajectory_id, scope, grouping, group_value, n_probes, n_seen from coverage
),

final as (
    select *
    from src_coverage
    where n_probes < 0 or n_seen < 0 or n_seen > n_probes
)

select * from final
