-- depends_on: stg_selections, stg_trajectory_cost
-- The rejection funnel of every selection, per room and overall (room_id = '').
-- A trajectory's reason is the first rule that rejected it, in funnel order.
-- Cost: what sampling every trajectory of the selection cost, and that spread
-- over the accepted ones (what one training example cost; null with none).
with

src_selections as (
    select selection_id, trajectory_id, accepted, reason, room_id from stg_selections
),

src_cost as (
    select trajectory_id, root_cost_usd + subagent_cost_usd as cost_usd from stg_trajectory_cost
),

flags as (
    select
        selection_id,
        room_id,
        coalesce(c.cost_usd, 0) as cost_usd,
        reason not in ('no_root_turn', 'not_finished') as finished,
        reason not in ('no_root_turn', 'not_finished', 'score') as passed_score,
        reason not in ('no_root_turn', 'not_finished', 'score', 'coverage') as passed_coverage,
        accepted
    from src_selections
    left join src_cost as c using (trajectory_id)
),

per_room as (
    select
        selection_id,
        room_id,
        count(*) as sampled,
        count(*) filter (where finished) as finished,
        count(*) filter (where passed_score) as passed_score,
        count(*) filter (where passed_coverage) as passed_coverage,
        count(*) filter (where accepted) as accepted,
        sum(cost_usd) as cost_usd
    from flags
    group by selection_id, room_id
),

overall as (
    select
        selection_id,
        '' as room_id,
        sum(sampled)::bigint as sampled,
        sum(finished)::bigint as finished,
        sum(passed_score)::bigint as passed_score,
        sum(passed_coverage)::bigint as passed_coverage,
        sum(accepted)::bigint as accepted,
        sum(cost_usd) as cost_usd
    from per_room
    group by selection_id
),

funnel as (
    select * from per_room
    union all
    select * from overall
),

final as (
    select
        *,
        -- USD of sampling per accepted training example
        cost_usd / nullif(accepted, 0) as cost_per_accepted_usd
    from funnel
)

select * from final
