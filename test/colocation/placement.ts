/**
 * Where each table goes on Citus (docs/SCALE-OUT.md, "Placement"): the check holds statements to it.
 */

/** Distributed by the run: one shard group holds a run's row and every row that hangs off it. */
export const RUN_TABLES: Record<string, string> = {
  ai_runs: 'id',
  ai_checkpoints: 'run_id',
  ai_commands: 'run_id',
  ai_events: 'run_id',
  ai_signals: 'run_id',
  ai_run_stream: 'run_id',
  ai_run_tags: 'run_id',
  ai_rewound_checkpoints: 'run_id',
};

/** Distributed by something else (their own co-location groups): never inside a run's shard. */
export const OTHER_DISTRIBUTED: Record<string, string> = {
  ai_slots: 'scope',
  ai_rate_tokens: 'scope',
  ai_budgets: 'name',
  ai_budget_use: 'budget',
  ai_schedules: 'name',
};

/** Reference tables (a copy on every node: joins anywhere, writes go to every node). */
export const REFERENCE_TABLES = ['ai_limits', 'ai_workers'];

/** Coordinator-only tables (never joined with a distributed table). */
export const LOCAL_TABLES = ['ai_admin_sessions', 'ai_migrations'];
