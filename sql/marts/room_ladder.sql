-- depends_on: stg_rooms, ladder_scores
-- The program-check ladder on each room of the run: what each reference root program scored there
-- (the newest ladder under the newest grader version). What a root can earn on a room, rung by rung.
with

src_ladder as (
    select *
    from ladder_scores
    qualify grader_version = max(grader_version) over (partition by room_id)
        and ladder_hash = first_value(ladder_hash) over (
            partition by room_id, grader_version order by created_at desc
        )
),

src_rooms as (
    select room_id, split, n_documents from stg_rooms
),

final as (
    select
        l.room_id,
        r.split,
        r.n_documents,
        l.rung,
        l.rung_index,
        l.headline,
        l.status,
        -- prompt + completion tokens the program's subagents used: what reading that much costs
        l.subagent_tokens
    from src_ladder as l
    join src_rooms as r using (room_id)
)

select * from final
