-- depends_on: trajectories, policies, subcalls, model_prices
-- One row per trajectory: its tokens by role and what they cost in USD at the
-- prices in model_prices (pipeline.costs). The root is priced by its policy's
-- base model (an adapter costs what its base model costs), each subagent call
-- by the model it went to. A model without a price row costs 0, as do the
-- embedded models, whose default price is 0.
with

src_trajectories as (
    select
        trajectory_id,
        policy_id,
        root_prompt_tokens,
        root_completion_tokens,
        sub_prompt_tokens,
        sub_completion_tokens
    from trajectories
),

src_policies as (
    select policy_id, base_model from policies
),

src_prices as (
    -- only priced models: with every price 0 the join below reads no subcall row
    select model, usd_per_mtok_in, usd_per_mtok_out
    from model_prices
    where usd_per_mtok_in > 0 or usd_per_mtok_out > 0
),

src_subcalls as (
    select trajectory_id, model, prompt_tokens, completion_tokens from subcalls
),

subagent_cost as (
    select
        c.trajectory_id,
        sum(c.prompt_tokens * p.usd_per_mtok_in + c.completion_tokens * p.usd_per_mtok_out) / 1e6 as usd
    from src_subcalls as c
    join src_prices as p using (model)
    group by c.trajectory_id
),

final as (
    select
        t.trajectory_id,
        t.root_prompt_tokens,
        t.root_completion_tokens,
        t.sub_prompt_tokens,
        t.sub_completion_tokens,
        coalesce(
            (t.root_prompt_tokens * rp.usd_per_mtok_in + t.root_completion_tokens * rp.usd_per_mtok_out) / 1e6,
            0
        ) as root_cost_usd,
        coalesce(sc.usd, 0) as subagent_cost_usd
    from src_trajectories as t
    left join src_policies as pol using (policy_id)
    left join src_prices as rp on rp.model = pol.base_model
    left join subagent_cost as sc using (trajectory_id)
)

select * from final
