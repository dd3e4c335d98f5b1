/**
 * The tables a durable transaction on another database keeps there (`@DurableTransaction({ dataSource })`
 * naming a DataSource that does not reach the module's database), beside the app's tables:
 * - `durable_fences`: the greatest (timeline, epoch) of each run that wrote there: `FenceVerifier`'s table
 *   and rule, shared with it. A transaction raises it first (its row then stays locked until it ends), and
 *   a transaction of a superseded claim finds it greater and commits nothing.
 * - `durable_transactions`: one completion row per transaction that committed, keyed by (run,
 *   generation, step index), with the step's name, fingerprint and output, and the writer's epoch and
 *   timeline, written in the same transaction as the body's writes. A claim that finds it reads it back
 *   instead of running the body again.
 * @internal
 */
export const OTHER_DATABASE_TABLES = ['durable_fences', 'durable_transactions'] as const;

/** The DDL of those tables (idempotent; two statements, `;\n` between), for a migration or `psql`. */
export const CREATE_TABLES_SQL = `create table if not exists durable_fences (run_id text primary key, timeline integer not null, epoch bigint not null, seen_at timestamptz not null default now());
create table if not exists durable_transactions (run_id text not null, generation integer not null, step_index integer not null, step_name text not null, fingerprint text, output jsonb not null, epoch bigint not null, timeline integer not null, created_at timestamptz not null default now(), primary key (run_id, generation, step_index))`;

/** Which of the tables are missing ($1: their names). */
export const MISSING_TABLES_SQL = `select t from unnest($1::text[]) t where to_regclass(t) is null`;

/**
 * The first statement of the transaction: the run's fence raised to this claim's (timeline, epoch)
 * unless a greater pair is stored (`fenced` 0: superseded), and the completion row of this step if an
 * earlier claim committed it. $1 run, $2 timeline, $3 epoch, $4 generation, $5 step index
 */
export const FENCE_AND_READ_SQL = `with f as (
  insert into durable_fences as f (run_id, timeline, epoch) values ($1, $2, $3)
  on conflict (run_id) do update set timeline = excluded.timeline, epoch = excluded.epoch, seen_at = now()
   where (f.timeline, f.epoch) <= (excluded.timeline, excluded.epoch)
  returning 1
)
select (select count(*) from f)::int as fenced,
       (select output::text from durable_transactions where run_id = $1 and generation = $4 and step_index = $5) as output,
       (select step_name from durable_transactions where run_id = $1 and generation = $4 and step_index = $5) as step_name`;

/**
 * The completion row, as the transaction's last statement before its COMMIT.
 * $1 run, $2 timeline, $3 epoch, $4 generation, $5 step index, $6 name, $7 fingerprint, $8 output (JSON)
 */
export const COMPLETE_SQL = `insert into durable_transactions (run_id, timeline, epoch, generation, step_index, step_name, fingerprint, output)
values ($1, $2, $3, $4, $5, $6, $7, $8::jsonb)`;
