-- One name per meaning: this column is the start of memo_turn (the turn in which
-- the memo was begun), not of the turn that called submit() (that one lives in the
-- trace JSON as submit_turn_started_s).
alter table trajectories rename column memo_started_s to memo_turn_started_s;
