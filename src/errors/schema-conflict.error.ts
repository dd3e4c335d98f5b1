import { DurableExecutionError } from './durable-execution.error';

/**
 * The module was asked to apply its migrations, but its tables already exist with no record of them in
 * its own migrations table (`ai_migrations`): the app's migrations created them (the app listed
 * `DURABLE_EXECUTION_MIGRATIONS` in its DataSource). Running them again would fail half-way, so nothing
 * was run and nothing was written.
 */
export class SchemaConflictError extends DurableExecutionError {
  declare readonly code: 'DURABLE_SCHEMA_CONFLICT';

  constructor(
    /** The module's tables found without a record in `migrationsTable`. */
    public readonly tables: string[],
    public readonly migrationsTable: string,
  ) {
    super(
      'DURABLE_SCHEMA_CONFLICT',
      `The durable-execution tables (${tables.join(', ')}) already exist, but ${migrationsTable} has no record ` +
        "of them: your app's own migrations applied them (DURABLE_EXECUTION_MIGRATIONS in your DataSource's " +
        '`migrations`). Set `database.migrationsRun: false` in DurableExecutionModule options and keep running ' +
        'them with your migrations; or, to hand them to the module, drop the tables and remove their rows from ' +
        "your app's migrations table. Nothing was run or written.",
    );
  }
}
