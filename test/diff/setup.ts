/**
 * The durable side's rigs: a database of its own, the world server, and workers, either in this process
 * (Nest apps with the worker's real timers) or as worker processes (the fault profile: this process only
 * starts runs and sends signals).
 */
import { INestApplication } from '@nestjs/common';
import { RunRepository } from '../../src';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { workerPool, type WorkerPool } from './faults';
import type { DurableEnv } from './harness';
import { LATE_CALL_GRACE_MS, UNIT_MS } from './program';
import { startWorld, type DiffWorld } from './world';
import { DIFF_PROVIDERS } from './workflow';

export interface Rig {
  env: DurableEnv;
  db: TestDatabase;
  world: DiffWorld;
  pool?: WorkerPool;
  close(): Promise<void>;
}

async function base(label: string): Promise<{ db: TestDatabase; world: DiffWorld }> {
  const world = await startWorld();
  // Step and command bodies in this process read it when they run.
  process.env.DIFF_WORLD_URL = world.url;
  return { db: await createTestDatabase(label), world };
}

/**
 * `workers` apps in this process, each a worker on its real schedule (timers on), with the default
 * lease and heartbeat (the semantics must not depend on them); a short poll for a prompt first claim,
 * and a late-call bound of LATE_CALL_GRACE_MS (a hung race loser ends its case in seconds).
 */
export async function inProcessRig(workers = 2, unitMs = UNIT_MS): Promise<Rig> {
  const { db, world } = await base('diff');
  const apps: INestApplication[] = [];
  for (let i = 0; i < workers; i++)
    apps.push(
      await bootApp(db.url, DIFF_PROVIDERS, {
        worker: {
          enabled: true,
          pollIntervalMs: 50,
          concurrency: 16,
          workerId: `diff-app${i}`,
          lateCallGraceMs: LATE_CALL_GRACE_MS,
        },
      }),
    );
  return {
    env: { runs: apps[0].get(RunRepository), world, unitMs },
    db,
    world,
    async close() {
      for (const a of apps) await a.close();
      await world.close();
      await db.drop();
    },
  };
}

/**
 * `workers` worker processes (lease 600 ms; at least two: one to kill, one to take over; a kill
 * starts a new one only when fewer than two are left, so spares save a boot per case); this process
 * runs no worker.
 */
export async function processRig(workers = 2, unitMs = UNIT_MS): Promise<Rig> {
  const { db, world } = await base('diff_faults');
  // Boots first: it applies the migrations before the workers start.
  const app = await bootApp(db.url, [], {});
  const pool = workerPool({ dbUrl: db.url, worldUrl: world.url, leaseTtlMs: 600 });
  try {
    await pool.fill(Math.max(2, workers));
  } catch (e) {
    await pool.close();
    throw e;
  }
  return {
    env: { runs: app.get(RunRepository), world, unitMs },
    db,
    world,
    pool,
    async close() {
      await pool.close();
      await app.close();
      await world.close();
      await db.drop();
    },
  };
}
