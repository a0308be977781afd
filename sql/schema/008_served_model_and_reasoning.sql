-- The name requests use for a policy's root: the base model's served name, or
-- for an adapter served by vLLM its LoRA module name (pipeline.policies).
alter table policies add column served_model varchar;
-- A reasoning model's separate thinking for the turn (GLM's reasoning_content); null for others.
alter table turns add column reasoning varchar;
