/**
 * Memory of a worker that parked many runs (issue 45 part 2: a park drops the workflow's frame instead
 * of throwing through it). One process, one database of its own: the worker's heap after a warm-up of
 * 200 runs, then after N more runs each parked on a wait inside `try { … } finally { … }` (their code
 * left waiting for ever), measured after a full GC. With frames kept alive, the heap would grow by
 * N × a frame; dropped, it stays where the warm-up left it.
 *   node --expose-gc -r ts-node/register/transpile-only bench/park-memory.ts [--runs 10000]
 * DATABASE_URL (default postgres://root@127.0.0.1:5432/test) names the server; the database is dropped.
 */
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Client } from 'pg';
import { DurableExecutionModule, DurableStep, DurableWorkflow, RunContext } from '../src';

const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg > 0 ? Number(process.argv[runsArg + 1]) : 10_000;
const server = process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test';
const dbName = `dx_park_memory_${process.pid}`;
const dbUrl = (() => {
  const u = new URL(server);
  u.pathname = `/${dbName}`;
  return u.toString();
})();
const finallies = { n: 0 };

@Injectable()
class Steps {
  @DurableStep({ name: 'prepare' })
  async prepare(n: number) {
    return { n, payload: 'x'.repeat(200) };
  }
}

@DurableWorkflow('park-memory')
class ParkMemory {
  constructor(private readonly steps: Steps) {}
  async run(input: { n: number }, ctx: RunContext) {
    const big = new Array(1000).fill(input.n); // held by the frame while it waits
    try {
      const prepared = await this.steps.prepare(input.n);
      await ctx.waitForSignal('never', { timeoutMs: 3_600_000 });
      return prepared.n + big.length;
    } finally {
      finallies.n++;
    }
  }
}

@Module({
  imports: [
    DurableExecutionModule.forRoot({
      database: { url: dbUrl, poolSize: 10 },
      worker: { concurrency: 64, pollIntervalMs: 20 },
      reconciler: { enabled: false },
    }),
  ],
  providers: [Steps, ParkMemory],
})
class BenchModule {}

async function admin(sql: string) {
  const c = new Client({ connectionString: server });
  await c.connect();
  await c.query(sql);
  await c.end();
}

async function parkAll(url: string, n: number, from: number): Promise<void> {
  const c = new Client({ connectionString: url });
  await c.connect();
  await c.query(
    `insert into ai_runs (kind, input) select 'park-memory', jsonb_build_object('n', i) from generate_series($1::int, $2::int) i`,
    [from, from + n - 1],
  );
  for (;;) {
    const { rows } = await c.query(
      `select count(*)::int as n from ai_runs where kind = 'park-memory' and status = 'waiting'`,
    );
    if (rows[0].n >= from + n - 1) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  await c.end();
}

function heapMb(): number {
  (global as { gc?: () => void }).gc?.();
  (global as { gc?: () => void }).gc?.();
  return process.memoryUsage().heapUsed / 1048576;
}

async function main() {
  if (!(global as { gc?: unknown }).gc) throw new Error('run with node --expose-gc');
  await admin(`create database ${dbName}`);
  const app = await NestFactory.createApplicationContext(BenchModule, { logger: ['error'] });
  try {
    await parkAll(dbUrl, 200, 1); // warm-up: code, statements, pools
    await new Promise((r) => setTimeout(r, 500));
    const before = heapMb();
    const t0 = Date.now();
    await parkAll(dbUrl, RUNS, 201);
    await new Promise((r) => setTimeout(r, 1000)); // the last phases end
    const after = heapMb();
    console.log(
      JSON.stringify({
        runsParked: RUNS,
        seconds: (Date.now() - t0) / 1000,
        heapBeforeMb: Number(before.toFixed(1)),
        heapAfterMb: Number(after.toFixed(1)),
        growthPerRunBytes: Math.round(((after - before) * 1048576) / RUNS),
        finallyRan: finallies.n,
      }),
    );
  } finally {
    await app.close();
    await admin(`drop database if exists ${dbName} with (force)`);
  }
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
