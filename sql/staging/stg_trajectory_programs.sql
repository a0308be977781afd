-- depends_on: turns
-- One row per trajectory that ran code: its program, the code of all its turns with whitespace
-- collapsed, as a hash (two episodes that ran the same program share it).
with

source as (
    select trajectory_id, turn_index, code from turns
),

final as (
    select
        trajectory_id,
        md5(string_agg(regexp_replace(coalesce(code, ''), '\s+', ' ', 'g'), '\n' order by turn_index))
            as program_md5
    from source
    group by trajectory_id
)

select * from final
