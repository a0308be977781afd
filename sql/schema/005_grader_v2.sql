-- Grader version 2 (pipeline.grading.reference): recall over the non-trap
-- criteria, precision over the claims the memo makes, one headline per memo.
-- Grades record the grader version that wrote them; rows written before
-- this migration were graded by version 1 (criteria pass rate, traps counted
-- as criteria, no precision, quotation or reading budget). Regrading keeps
-- the old rows; views read each trajectory's latest version.

alter table grades add column grader_version integer default 1;

-- per labelled document, each claim kind the room's experts labelled present (true) or absent
-- (false): {"<path>": {"<kind>": true}}; null when the room's truth is its criteria (generated,
-- imported rooms)
alter table rooms add column claim_labels json;

create table memo_scores (
    trajectory_id varchar not null,
    judge varchar not null,              -- reference | llm:<model>
    grader_version integer not null,
    recall double not null,              -- non-trap criteria passed / non-trap criteria
    "precision" double not null,         -- true claims above chance / claims judged (1 with no claims)
    headline double not null,            -- 2 * precision * recall / (precision + recall)
    n_claims integer not null,           -- claims judged true or false
    n_false_claims integer not null,
    traps_failed integer not null,       -- decoys the memo flagged
    memo_words integer not null,         -- words in the memo as submitted
    budget_words integer not null,       -- words a reader reads before stopping
    cut boolean not null,                -- the memo ran past the budget and was graded on its start
    quoted_words integer not null,       -- words set aside as text copied from the room
    graded_at timestamp not null,
    primary key (trajectory_id, judge, grader_version)
);
