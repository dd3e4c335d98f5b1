import { DurableExecutionError } from './durable-execution.error';

/**
 * The app booted with `database.migrationsRun: false`, and the module's tables are missing or behind
 * its migrations: every run would fail later with a raw `relation "ai_runs" does not exist`. The boot
 * fails now instead, naming how to apply them.
 */
export class SchemaNotReadyError extends DurableExecutionError {
  declare readonly code: 'DURABLE_SCHEMA_NOT_READY';

  constructor(
    /** The PostgreSQL schema the module's tables belong in. */
    public readonly schema: string,
    /** What is missing there: tables (`ai_runs`) or columns of later migrations (`ai_runs.notify_on_finish`). */
    public readonly missing: string[],
  ) {
    const flag = schema === 'public' ? '' : ` --schema ${schema}`;
    super(
      'DURABLE_SCHEMA_NOT_READY',
      `The durable-execution tables in schema "${schema}" are missing or not up to date (missing: ` +
        `${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ', …' : ''}), and ` +
        'database.migrationsRun is false, so the module does not apply them. Apply them before the app starts: ' +
        `\`DATABASE_URL=… npx nestjs-durable-execution migrate${flag}\`, or list DURABLE_EXECUTION_MIGRATIONS in ` +
        "your DataSource's `migrations` with `migrationsRun: true`, or set `database.migrationsRun: true`.",
    );
  }
}
