-- What the root's server sampled on each turn, for GRPO to train exactly those tokens
-- (models.root.return_tokens; RL rollouts turn it on): JSON arrays of the token ids, stop string and
-- end-of-turn token included, and of each one's log-probability under the sampling distribution.
-- NULL for turns sampled without it. Read as lists with `token_ids::json::int[]`.
alter table turns add column token_ids varchar;
alter table turns add column token_logprobs varchar;
