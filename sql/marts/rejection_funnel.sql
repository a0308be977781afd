-- depends_on: stg_selections
-- The rejection funnel of every selection, per room and overall (room_id = '').
-- A trajectory's reason is the first rule that rejected it, in funnel order.
with

src_selections as (
    select selection_id, trajectory_id, accepted, reason, room_id from stg_selections
),

flags as (
    select
        selection_id,
        room_id,
        reason not in ('no_root_turn', 'not_finished') as finished,
        reason not in ('no_root_turn', 'not_finished', 'score') as passed_score,
        reason not in ('no_root_turn', 'not_finished', 'score', 'coverage') as passed_coverage,
        accepted
    from src_selections
),

per_room as (
    select
        selection_id,
        room_id,
        count(*) as sampled,
        count(*) filter (where finished) as finished,
        count(*) filter (where passed_score) as passed_score,
        count(*) filter (where passed_coverage) as passed_coverage,
        count(*) filter (where accepted) as accepted
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
        sum(accepted)::bigint as accepted
    from per_room
    group by selection_id
),

final as (
    select * from per_room
    union all
    select * from overall
)

select * from final
