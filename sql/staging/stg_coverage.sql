-- depends_on: coverage
-- Probe coverage per trajectory, reading scope (all | root | subagent) and
-- grouping (total | folder | category; group_value is '' for total).
with

source as (
    select * from coverage
),

final as (
    select
        trajectory_id,
        scope,
        grouping,
        group_value,
        n_probes,
        n_seen
    from source
)

select * from final
