-- Per RL step, the tokens the update's forward/backward passes ran through the model. With
-- rl.pack_shared_prefix (pipeline.training.shared_prefix) a micro-batch's shared prompt counts once and
-- padding not at all; compare with `tokens` (every rollout's prompt + completion). Flat groups left out
-- of the update count nothing. NULL where packing was off and for steps recorded before.
alter table rl_steps add column update_tokens bigint;
