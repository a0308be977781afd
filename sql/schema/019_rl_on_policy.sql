-- GRPO that trains what the root sampled (pipeline.training.rl, docs/rl.md).

-- A policy's adapter weights, hashed (the adapter's safetensors): part of the policy id, and so of its
-- LoRA module's name, so a server never serves one run's module for another run's weights.
-- NULL for policies registered without it (base policies, SFT adapters before this migration).
alter table policies add column weights_hash varchar;

-- Per step: the off-policy correction (truncated importance sampling; pipeline.training.importance),
-- over the root's tokens of the rollouts trained on: the ratio trainer / sampler probability before the
-- cap (mean, max) and the share of tokens clipped at rl.importance_cap.
alter table rl_steps add column ratio_mean double;
alter table rl_steps add column ratio_max double;
alter table rl_steps add column ratio_clipped_share double;
-- Rollouts that failed before the root's first token or on the server (no reward, no advantage), and
-- how many were sampled again because more than evaluate.max_serving_failed of the step had failed.
alter table rl_steps add column n_failed integer;
alter table rl_steps add column n_redone integer;
-- Replacement groups (rl.max_replacement_groups): groups drawn on other rooms for flat ones, and how
-- many of them replaced a flat group because their rewards differed.
alter table rl_steps add column n_replacement_groups integer;
alter table rl_steps add column n_replaced integer;
-- The weight probe: mean absolute difference between the server's and the trainer's log-probabilities
-- of a fixed sequence under the step's module (NULL for in-process generation).
alter table rl_steps add column probe_logprob_diff double;
-- The reward-hacking watch: the thresholds it crossed (rl.watch), '' when none.
alter table rl_steps add column watch varchar;

-- Which rollouts the update trained on: false for a flat group a replacement group took the place of,
-- for a replacement group that stayed flat, and for a failed rollout sampled again.
alter table rl_rollouts add column trained boolean;
