-- The slowest and failing subagent calls: latency by model and depth, and
-- the share that returned an error (timeouts, 5xx after retries, budgets).
with

calls as (
    select model, depth, latency_s, error is not null as failed from subcalls
),

final as (
    select
        model,
        depth,
        count(*) as n_calls,
        avg(latency_s) as mean_latency_s,
        quantile_cont(latency_s, 0.95) as p95_latency_s,
        avg(failed::int) as error_rate
    from calls
    group by model, depth
)

select * from final order by n_calls desc
