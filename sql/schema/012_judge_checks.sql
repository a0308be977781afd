-- `python -m pipeline judge-check`: how well an LLM judge agrees with the
-- reference judge (generated rooms) and with CUAD's expert labels (CUAD rooms).
-- One row per (check, judge, comparison, memo set, criterion kind); the
-- report's judge section shows the newest check. Numbered 012 to leave 010 and
-- 011 to migrations of other branches.
create table judge_checks (
    check_id varchar not null,       -- one judge-check command
    checked_at timestamp not null,
    judge varchar not null,          -- llm:<model>, or reference (against the CUAD experts)
    against varchar not null,        -- reference | cuad-experts
    memos varchar not null,          -- all | known-answer | sampled | expert_labels+empty
    kind varchar not null,           -- criterion kind, or 'all'
    n integer not null,              -- verdict pairs both sides graded
    n_ungraded integer not null,     -- pairs left out: the judge gave no valid verdict
    agreement double,
    truth_pass double,               -- pass rate of the side compared against
    judge_pass double,
    kappa double,                    -- Cohen's kappa; null when undefined
    criteria integer not null,       -- the whole check: criteria the LLM judge was asked
    valid integer not null,          -- ... and gave a valid verdict
    seconds double not null,         -- ... and seconds spent waiting on it
    primary key (check_id, judge, against, memos, kind)
);
