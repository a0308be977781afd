-- Per RL step, the rollouts whose forward/backward pass the update left out: members of groups whose
-- rewards were all equal, whose gradient is exactly zero (pipeline.training.flat_groups). NULL where
-- skipping was off (rl.skip_flat_groups=false, several processes, beta > 0) and for steps recorded before.
alter table rl_steps add column n_skipped integer;
