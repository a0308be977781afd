-- The kernel layer each trajectory's REPL worker ran under (pipeline.harness.kernel_layer):
-- bwrap+seccomp | seccomp | python; null for harnesses without a REPL and for rows written before 006.
alter table trajectories add column sandbox_level varchar;
