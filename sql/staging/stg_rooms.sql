-- depends_on: rooms
-- One row per data room: its split and size (the room's contents live in documents).
with

source as (
    select * from rooms
),

final as (
    select
        room_id,
        split,
        n_documents,
        n_tokens
    from source
)

select * from final
