-- A hash of the prompt variant's text (its sections, harness and worked example;
-- pipeline.harness.prompts.variant_hash): part of the policy id, so editing a variant's prompt makes a
-- new policy instead of pooling its episodes with the old text's. NULL for policies registered before 022.
alter table policies add column prompt_hash varchar;
