-- Prices of the models a run used, so cost is a column of the marts like any
-- other: written from the config's models.<role>.usd_per_mtok_in/out by the
-- commands that sample and report (pipeline.costs.record_prices). Keyed by the
-- name the warehouse records for a model: policies.base_model for the root (an
-- adapter is priced as its base model), subcalls.model for subagents. The
-- embedded models (local SmolLM2, the extractive reader) default to 0 USD.
create table model_prices (
    model varchar primary key,
    role varchar not null,               -- root | subagent | judge: the config section the price came from
    usd_per_mtok_in double not null,     -- USD per million prompt tokens
    usd_per_mtok_out double not null,    -- USD per million completion tokens
    recorded_at timestamp not null
);
