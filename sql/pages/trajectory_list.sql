-- One row per trajectory for the trajectory pages and the list page: scores,
-- cost, the room's name and the decision of one selection ($selection_id;
-- null before the filter ran). Held-out trajectories are in no selection.
-- Parameters: $selection_id (may be null), $trajectory_id (null = all).
with

src_scores as (
    select * from trajectory_scores
    where $trajectory_id is null or trajectory_id = $trajectory_id
),

src_rooms as (
    select room_id, name as room_name from rooms
),

src_trajectories as (
    select trajectory_id, end_reason, memo, started_at from trajectories
),

src_selection as (
    select trajectory_id, accepted, reason from selections where selection_id = $selection_id
),

final as (
    select
        s.*,
        r.room_name,
        t.end_reason,
        t.memo,
        t.started_at,
        -- 'accepted', the first rule that rejected it, or null: not in the selection
        sel.reason as filter_reason,
        sel.accepted as filter_accepted
    from src_scores as s
    left join src_rooms as r using (room_id)
    left join src_trajectories as t using (trajectory_id)
    left join src_selection as sel using (trajectory_id)
)

select * from final
order by room_id, policy_id, purpose, sample_index
