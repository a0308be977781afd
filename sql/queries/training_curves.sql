-- Training and validation loss per step for every train run, with the
-- dataset it trained on and the policy it produced.
with

runs as (
    select train_id, dataset_id, policy_id, parent_policy_id from train_runs
),

logs as (
    select train_id, step, epoch, loss, eval_loss, learning_rate from train_logs
),

final as (
    select r.policy_id, r.parent_policy_id, r.dataset_id, l.*
    from logs as l join runs as r using (train_id)
)

select * from final order by train_id, step
