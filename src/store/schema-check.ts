import type { DurableDataSource } from '../options/durable-execution-options.interface';
import { DEFAULT_NAMES, DurableNames } from './durable-names';
import { DURABLE_TABLES } from './run-migrations';

/** Tables later migrations add. */
const LATER_TABLES = [
  'ai_admin_sessions',
  'ai_workers',
  'ai_limits',
  'ai_slots',
  'ai_schedules',
  'ai_rate_tokens',
  'ai_budgets',
  'ai_budget_use',
  'ai_run_stream',
  'ai_run_tags',
] as const;

/** Columns later migrations add (table, column): one missing means the schema is behind. */
const LATER_COLUMNS: ReadonlyArray<readonly [string, string]> = [
  ['ai_checkpoints', 'seq'],
  ['ai_checkpoints', 'fingerprint'],
  ['ai_runs', 'notify_on_finish'],
  ['ai_runs', 'limited_by'],
  ['ai_limits', 'rate_limit'],
  ['ai_runs', 'debounce_key'],
  ['ai_runs', 'parent_id'],
  ['ai_runs', 'tags'],
  ['ai_limits', 'hold_waiting'],
  ['ai_schedules', 'concurrency_key'],
  ['ai_runs', 'stream_seq'],
  ['ai_runs', 'generation'],
  ['ai_runs', 'kind_version'],
  ['ai_workers', 'versions'],
  ['ai_runs', 'timeline'],
  ['ai_runs', 'lookup_first'],
  ['ai_schedules', 'timeline'],
  ['ai_schedules', 'max_attempts'],
  ['ai_runs', 'record_format'],
  ['ai_workers', 'handoff_token'],
  ['ai_runs', 'handoff_expires_at'],
  ['ai_checkpoints', 'event_id'],
];

/**
 * What the module's schema lacks, read-only: its missing tables, then the columns later migrations add
 * (`ai_runs.notify_on_finish`); empty when it is there, whoever applied it (the module, the CLI, or
 * the app's own migrations, recorded in the app's migrations table). Checked at boot when the module
 * does not apply its migrations (`database.migrationsRun: false`).
 */
export async function missingDurableSchema(
  ds: Pick<DurableDataSource, 'query'>,
  names: DurableNames = DEFAULT_NAMES,
): Promise<string[]> {
  const items = [
    ...[...DURABLE_TABLES, ...LATER_TABLES].map((t) => ({
      label: t,
      qualified: `${names.prefix}${t}`,
      column: null as string | null,
    })),
    ...LATER_COLUMNS.map(([t, c]) => ({ label: `${t}.${c}`, qualified: `${names.prefix}${t}`, column: c })),
  ];
  const rows: { label: string }[] = await ds.query(
    `select i.label from unnest($1::text[], $2::text[], $3::text[]) as i(label, qualified, col)
      where to_regclass(i.qualified) is null
         or (i.col is not null and not exists (select 1 from pg_attribute a
              where a.attrelid = to_regclass(i.qualified) and a.attname = i.col and not a.attisdropped))`,
    [items.map((i) => i.label), items.map((i) => i.qualified), items.map((i) => i.column)],
  );
  return rows.map((r) => r.label);
}
