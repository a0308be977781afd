-- depends_on: rl_steps, rl_runs
-- One row per RL optimiser step: the mean reward (the reference judge's headline of the step's rollouts)
-- with its 95% interval, the off-policy correction, flat groups and their replacements, the watch,
-- and where the step's wall time went.
with

steps as (
    select * from rl_steps
),

runs as (
    select rl_id, start_policy_id, policy_id, generation from rl_runs
),

final as (
    select
        s.rl_id,
        r.start_policy_id,
        r.policy_id,
        r.generation,
        s.step,
        s.n_rollouts,
        s.reward_mean,
        s.reward_std,
        -- the 95% bootstrap interval stored with the step (the one `pipeline rl` prints); steps recorded
        -- before it was stored get the normal band mean +- 1.96 sd / sqrt(n)
        coalesce(
            s.reward_ci_low, s.reward_mean - 1.96 * s.reward_std / sqrt(greatest(s.n_rollouts, 1))
        ) as reward_band_low,
        coalesce(
            s.reward_ci_high, s.reward_mean + 1.96 * s.reward_std / sqrt(greatest(s.n_rollouts, 1))
        ) as reward_band_high,
        s.zero_advantage_share,
        -- rollouts of flat groups the update did not run through the model (zero gradient); null: not skipping
        s.n_skipped,
        s.loss,
        s.kl,
        s.grad_norm,
        s.tokens,
        s.trained_tokens,
        -- tokens the update's passes ran through the model (shared prompts once, no padding); null: not packing
        s.update_tokens,
        s.n_copied,
        s.n_over_budget,
        -- the off-policy correction: trainer / sampler probability of the root's tokens, before the cap
        s.ratio_mean,
        s.ratio_max,
        s.ratio_clipped_share,
        -- rollouts without a reward (failed on the server) and failed slots sampled again
        s.n_failed,
        s.n_redone,
        -- groups drawn on other rooms for flat ones, and how many took a flat group's place
        s.n_replacement_groups,
        s.n_replaced,
        s.probe_logprob_diff,
        -- the thresholds of rl.watch the step crossed ('' none; null: recorded before the watch acted)
        s.watch,
        s.rollout_s,
        s.grade_s,
        s.sync_s,
        s.update_s
    from steps as s
    left join runs as r using (rl_id)
)

select * from final
