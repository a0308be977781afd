-- Probes that do not lie inside their document: the document is missing, or
-- the probe's text is not at char_offset in the document's text.
with

src_probes as (
    select room_id, probe_id, path, char_offset, text from probes
),

src_documents as (
    select room_id, path, text from documents
),

final as (
    select p.room_id, p.probe_id, p.path, p.char_offset, p.text
    from src_probes as p
    left join src_documents as d using (room_id, path)
    where d.path is null
        or p.char_offset < 0
        -- a document with no text gets its path as its one probe (pipeline.rooms.probes)
        or (
            substr(d.text, p.char_offset + 1, length(p.text)) <> p.text
            and not (trim(d.text) = '' and p.text = p.path)
        )
)

select * from final
