import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DurableExecutionModule, DurableStep, DurableWorkflow } from '../src';
import { DurableDatabase } from '../src/store/durable-database';

/**
 * One worker "pod" of `npm run bench:processes` (bench/processes.ts), as an OS process of its own. Env:
 * PB_URL (the pool's URL: direct or PgBouncer), PB_DIRECT (`database.directUrl`, or empty), PB_NAMED
 * (`1`: named prepared statements), PB_CONCURRENCY, PB_POOL. Times every step commit (`dx_step_write`,
 * client side: pool wait + round trip) and answers `stats` over IPC.
 */

export const KIND = 'pb-steps';

@Injectable()
class Echo {
  @DurableStep()
  async echo(i: number) {
    return i;
  }
}

@DurableWorkflow(KIND)
class StepsWorkflow {
  constructor(private readonly e: Echo) {}
  async run(input: { steps: number }) {
    let sum = 0;
    for (let i = 0; i < input.steps; i++) sum += await this.e.echo(i);
    return sum;
  }
}

/** What a worker reports: its step-commit latencies (ms) since the last report, and its connections. */
export interface PodStats {
  commits: number[];
  statements: number;
  /** Client connections of the pool (to PostgreSQL or PgBouncer) at their most. */
  poolMax: number;
  pid: number;
}

const commits: number[] = [];
let statements = 0;
let poolMax = 0;
const query = DurableDatabase.prototype.query;
DurableDatabase.prototype.query = async function timed(this: DurableDatabase, ...args: unknown[]) {
  const t0 = performance.now();
  try {
    return await (query as (...a: unknown[]) => Promise<never>).apply(this, args);
  } finally {
    statements++;
    if (args[2] === 'dx_step_write') commits.push(performance.now() - t0);
    poolMax = Math.max(poolMax, this.pool.totalCount);
  }
} as typeof query;

const direct = process.env.PB_DIRECT || undefined;

@Module({
  imports: [
    DurableExecutionModule.forRoot({
      database: {
        url: process.env.PB_URL!,
        ...(direct ? { directUrl: direct } : {}),
        preparedStatements: process.env.PB_NAMED === '1',
        poolSize: Number(process.env.PB_POOL ?? 5),
        migrationsRun: false,
      },
      worker: {
        concurrency: Number(process.env.PB_CONCURRENCY ?? 4),
        pollIntervalMs: 200,
        presenceIntervalMs: 60_000,
      },
      reconciler: { enabled: false },
    }),
  ],
  providers: [Echo, StepsWorkflow],
})
class PodModule {}

async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(PodModule, { logger: ['error'] });
  app.enableShutdownHooks();
  process.on('message', (m: string) => {
    if (m === 'stats') {
      const s: PodStats = { commits: commits.splice(0), statements, poolMax, pid: process.pid };
      statements = 0;
      process.send!(s);
    } else if (m === 'stop') void app.close().then(() => process.exit(0));
  });
  process.send!('ready');
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
