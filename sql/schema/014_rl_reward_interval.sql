-- The 95% interval of each RL step's mean reward, computed when the step is recorded (a percentile
-- bootstrap over the step's rollouts, pipeline.stats.bootstrap_mean_ci, as every other interval here).
-- Steps recorded before this column fall back to the normal band in the rl_step_summary mart.
alter table rl_steps add column reward_ci_low double;
alter table rl_steps add column reward_ci_high double;
