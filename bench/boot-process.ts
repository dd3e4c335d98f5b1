/**
 * The child process of `npm run bench:boot` (bench/boot.ts), compiled to plain JavaScript and forked
 * once per boot: `node boot-process.js plain|worker` with BOOT_URL set. It boots one Nest application
 * context and tells the parent over IPC when it is ready, with how long that took on its own clock, its
 * CPU time and how many modules it had loaded:
 *
 * - `plain`: a bare Nest application context with a TypeORM DataSource (`@nestjs/typeorm`'s
 *   `TypeOrmModule.forRoot`, the database of BOOT_URL); ready when its first query (`select 1`) returns.
 * - `worker`: the same app module with the same DataSource, plus `DurableExecutionModule` reusing it
 *   (`dataSourceName: 'default'`, as docs/EXISTING-APP.md does) and one workflow; a run of that workflow
 *   is already due when the process starts. Ready when the worker has claimed it and its step body
 *   begins. BOOT_MIGRATIONS_RUN=1 boots with `database.migrationsRun: true` (the default: the schema is
 *   up to date, so that costs a read), otherwise false.
 *
 * Only public entry points are loaded (`nestjs-durable-execution`'s root, here `../src`, is required in
 * worker mode only), so the module count is what an app's worker process loads. For a look inside:
 * BOOT_LOG=1 keeps Nest's logger on; BOOT_DUMP_MODULES=/tmp/x writes the loaded modules to /tmp/x.<mode>.
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';

/** What the child sends once ready. */
export interface BootReport {
  mode: 'plain' | 'worker';
  /** `performance.now()` at ready: ms since this process's time origin (its start). */
  sinceStartMs: number;
  /** User + system CPU of this process until ready, ms. */
  cpuMs: number;
  /** Entries of `require.cache` at ready. */
  modules: number;
  /** `performance.now()` and CPU ms at each phase's end: Nest and TypeORM required, the library required, the context created. */
  marks: Record<string, { atMs: number; cpuMs: number }>;
}

const marks: BootReport['marks'] = {};
function mark(name: string): void {
  const cpu = process.cpuUsage();
  marks[name] = { atMs: performance.now(), cpuMs: (cpu.user + cpu.system) / 1000 };
}

export const BOOT_KIND = 'bench.boot';

function report(mode: BootReport['mode']): void {
  const sinceStartMs = performance.now();
  const cpu = process.cpuUsage();
  if (process.env.BOOT_DUMP_MODULES)
    writeFileSync(
      `${process.env.BOOT_DUMP_MODULES}.${mode}`,
      [
        ...Object.keys(require.cache),
        ...(process as unknown as { moduleLoadList: string[] }).moduleLoadList,
      ].join('\n'),
    );
  const msg: BootReport = {
    mode,
    sinceStartMs,
    cpuMs: (cpu.user + cpu.system) / 1000,
    modules: Object.keys(require.cache).length,
    marks,
  };
  process.send!(msg, () => process.exit(0));
}

/* eslint-disable @typescript-eslint/no-require-imports -- each mode loads only what its app would */
async function main(): Promise<void> {
  const mode = process.argv[2] as BootReport['mode'];
  const url = process.env.BOOT_URL!;
  const { Module } = require('@nestjs/common') as typeof import('@nestjs/common');
  const { NestFactory } = require('@nestjs/core') as typeof import('@nestjs/core');
  const { TypeOrmModule } = require('@nestjs/typeorm') as typeof import('@nestjs/typeorm');
  mark('nest');
  const typeOrm = TypeOrmModule.forRoot({ type: 'postgres', url, poolSize: 10, entities: [] });
  const logger = process.env.BOOT_LOG ? undefined : (false as const);

  if (mode === 'plain') {
    @Module({ imports: [typeOrm] })
    class PlainModule {}
    const app = await NestFactory.createApplicationContext(PlainModule, { logger });
    mark('context');
    const { DataSource } = require('typeorm') as typeof import('typeorm');
    await app.get(DataSource).query('select 1');
    report('plain');
    return;
  }

  const dx = require('../src') as typeof import('../src');
  mark('library');
  @dx.DurableWorkflow(BOOT_KIND)
  class BootWorkflow {
    @dx.DurableStep()
    async mark(): Promise<number> {
      report('worker');
      return 1;
    }
    async run(): Promise<number> {
      return this.mark();
    }
  }
  @Module({
    imports: [
      typeOrm,
      dx.DurableExecutionModule.forRoot({
        database: { dataSourceName: 'default', migrationsRun: process.env.BOOT_MIGRATIONS_RUN === '1' },
        reconciler: { enabled: true },
      }),
    ],
    providers: [BootWorkflow],
  })
  class WorkerModule {}
  await NestFactory.createApplicationContext(WorkerModule, { logger });
  mark('context');
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
