-- The newest `judge-check`'s agreement rows (sql/schema/012_judge_checks.sql),
-- in the order judge-check prints them.
with

checks as (
    select * from judge_checks
),

newest as (
    select check_id from checks order by checked_at desc, check_id desc limit 1
),

final as (
    select c.*
    from checks as c
    join newest using (check_id)
)

select * from final
order by against desc, judge, memos, kind = 'all', kind
