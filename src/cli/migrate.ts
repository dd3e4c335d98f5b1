#!/usr/bin/env node
/* Operators: `DATABASE_URL=postgres://... npm run migration:run` (or `-- --revert`). */
import 'reflect-metadata';
import { revertDurableMigrations, runDurableMigrations } from '../persistence/run-migrations';

async function main(): Promise<void> {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('DATABASE_URL is not set: export the connection string of the target database');
  const options = { type: 'postgres' as const, url };
  if (process.argv.includes('--revert')) {
    await revertDurableMigrations(options);
    console.log('durable-execution: all migrations reverted');
  } else {
    const ran = await runDurableMigrations(options);
    console.log(
      ran.length ? `durable-execution: applied ${ran.join(', ')}` : 'durable-execution: schema up to date',
    );
  }
}

main().catch((err) => {
  console.error(`durable-execution migration failed: ${(err as Error).message}`);
  process.exit(1);
});
