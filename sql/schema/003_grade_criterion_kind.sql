-- Grades carry their criterion's kind and trap flag, copied from `criteria`
-- when graded (a room's rubric never changes once stored). The score views
-- then aggregate grades without joining every grade row to `criteria` on
-- (room_id, criterion_id): at 8M grades that join alone took over a second.

alter table grades add column kind varchar;     -- the criterion's kind, as in criteria.kind
alter table grades add column is_trap boolean;  -- the criterion's is_trap

update grades as g
set kind = c.kind, is_trap = c.is_trap
from trajectories as t, criteria as c
where t.trajectory_id = g.trajectory_id
    and c.room_id = t.room_id
    and c.criterion_id = g.criterion_id;
