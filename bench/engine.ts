import { INestApplicationContext, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { Pool } from 'pg';
import {
  DurableExecutionModule,
  DurableStep,
  DurableTransaction,
  DurableTransactionHost,
  DurableWorkflow,
  RunRepository,
} from '../src';
import { DurableWorker } from '../src/engine/worker.service';
import { RunStateStore } from '../src/store/run-state/run-state.store';
import { DurableDatabase } from '../src/store/durable-database';
import { BenchDatabase, TX_INSERT, WalWindow } from './database';
import { LoopResult, withCpu } from './raw';
import { sleep, SteadyMeter } from './stats';

export const ENGINE_KIND = 'bench.steps';
/** The workflow of `@DurableTransaction` steps (each one INSERT into an app table). */
export const TX_KIND = 'bench.tx';

/**
 * What an instrumented run records: the duration of every step call as the workflow sees it (from the
 * call of the decorated method to the resolution of its promise: the whole step wrapper with replay
 * lookup, body, serialisation and the fenced commit), the statements sent while each step ran, and
 * the WAL position right before the first step and right after the last one.
 */
const probe = {
  active: false,
  inStep: false,
  statementsInStep: 0,
  stepMs: [] as number[],
  statementsPerStep: [] as number[],
  walPosition: async (): Promise<string | null> => null,
  walFrom: null as string | null,
  walTo: null as string | null,
};

@DurableWorkflow(ENGINE_KIND)
export class BenchWorkflow {
  async run(input: { steps: number }): Promise<{ steps: number }> {
    // Claim and checkpoint load are done, the finish comes after the loop: the window holds the steps only.
    if (probe.active) probe.walFrom = await probe.walPosition();
    for (let i = 0; i < input.steps; i++) {
      if (!probe.active) {
        await this.step(i);
        continue;
      }
      probe.inStep = true;
      probe.statementsInStep = 0;
      const t0 = performance.now();
      await this.step(i);
      probe.stepMs.push(performance.now() - t0);
      probe.inStep = false;
      probe.statementsPerStep.push(probe.statementsInStep);
    }
    if (probe.active) {
      // A step's commit is sent when the next call starts (or on the next event-loop turn), so each
      // window above holds the commit of the step before it. One more step, then a turn that writes
      // its commit alone (a last step followed only by `return` would ride on the finish): every step
      // of this run is written by a statement of its own inside the counted windows and the WAL window.
      for (const settle of [() => this.step(input.steps), () => sleep(20)]) {
        probe.inStep = true;
        probe.statementsInStep = 0;
        await settle();
        probe.inStep = false;
        probe.statementsPerStep.push(probe.statementsInStep);
      }
      probe.walTo = await probe.walPosition();
    }
    return { steps: input.steps };
  }

  /** A compute step: nothing but the engine's own work around it. */
  @DurableStep()
  async step(i: number): Promise<{ i: number }> {
    return { i };
  }
}

/** The body of a durable transaction: one INSERT into the app's table, on the transaction's client. */
@Injectable()
export class BenchTxSteps {
  constructor(private readonly tx: DurableTransactionHost) {}

  @DurableTransaction({ name: 'bench.insert' })
  async insert(i: number): Promise<{ i: number }> {
    await this.tx.client.query({ ...TX_INSERT, values: [i, 'durable'] });
    return { i };
  }
}

/**
 * `steps` durable transactions one after the other. Each commits inside its own call (its checkpoint
 * is the transaction's last statement), so each window holds exactly its own round trips.
 */
@DurableWorkflow(TX_KIND)
export class BenchTxWorkflow {
  constructor(private readonly steps: BenchTxSteps) {}

  async run(input: { steps: number }): Promise<{ steps: number }> {
    if (probe.active) probe.walFrom = await probe.walPosition();
    for (let i = 0; i < input.steps; i++) {
      if (!probe.active) {
        await this.steps.insert(i);
        continue;
      }
      probe.inStep = true;
      probe.statementsInStep = 0;
      const t0 = performance.now();
      await this.steps.insert(i);
      probe.stepMs.push(performance.now() - t0);
      probe.inStep = false;
      probe.statementsPerStep.push(probe.statementsInStep);
    }
    if (probe.active) probe.walTo = await probe.walPosition();
    return { steps: input.steps };
  }
}

@Module({})
class BenchAppModule {}

/** Replaces `obj[key]` by `wrap(original)` on the instance; returns the undo. */
function patch<T extends object, K extends keyof T>(
  obj: T,
  key: K,
  wrap: (original: T[K]) => T[K],
): () => void {
  const original = obj[key];
  obj[key] = wrap(original);
  return () => {
    delete obj[key];
    if (obj[key] !== original) obj[key] = original;
  };
}

/** Result of one instrumented sequential run. */
export interface SequentialResult {
  /** Step call duration (workflow view), ms. */
  stepMs: number[];
  /** Step commits written inside the counted windows (the measured steps and one more). */
  stepsWritten: number;
  /** RunStateStore.writeStep duration (the commit round trip as the engine issues it), ms. */
  writeStepMs: number[];
  /** Statements sent on the engine's pool in each window (a step's call, then the two settling ones). */
  statementsPerStep: number[];
  /** Statement names seen inside steps. */
  stepStatementNames: Record<string, number>;
  /** Every statement the engine sent for the run (claim, checkpoint load, steps, finish, next claim). */
  totalStatements: Record<string, number>;
  /** Commits and WAL of the bench database from just before the first step to just after the last. */
  wal: WalWindow | null;
}

/** Result of one instrumented run of durable transactions. */
export interface TransactionRunResult {
  /** The `@DurableTransaction` call as the workflow sees it (open, body, fenced commit), ms. */
  stepMs: number[];
  /** Round trips to the server inside each call: every query of the engine's pg clients (pool or checked out). */
  roundTripsPerStep: number[];
  /** Their statements by name (or first words). */
  stepStatementNames: Record<string, number>;
  /** Commits and WAL of the bench database from just before the first transaction to just after the last. */
  wal: WalWindow | null;
}

/** The engine side: the Nest module booted against the bench database, timers off, driven by tick(). */
export class EngineBench {
  private constructor(
    private readonly app: INestApplicationContext,
    private readonly db: BenchDatabase,
    readonly worker: DurableWorker,
    readonly runs: RunRepository,
    readonly store: RunStateStore,
    readonly pool: Pool,
  ) {}

  static async boot(db: BenchDatabase, concurrency: number, poolSize: number): Promise<EngineBench> {
    const app = await NestFactory.createApplicationContext(
      {
        module: BenchAppModule,
        imports: [
          DurableExecutionModule.forRoot({
            database: { url: db.url, poolSize },
            worker: { enabled: false, concurrency },
            reconciler: { enabled: false },
          }),
        ],
        providers: [BenchWorkflow, BenchTxSteps, BenchTxWorkflow],
      },
      { logger: ['error', 'warn'] },
    );
    await app.init();
    return new EngineBench(
      app,
      db,
      app.get(DurableWorker),
      app.get(RunRepository),
      app.get(RunStateStore, { strict: false }),
      app.get(DurableDatabase, { strict: false }).pool,
    );
  }

  /**
   * Claims and drives until no run of the bench kind is open. Returns the time at which the last run
   * settled (before the status check). Throws if a run fails or the deadline passes.
   */
  async drainAll(timeoutMs = 180_000): Promise<number> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      await this.worker.tick();
      await this.worker.idle();
      const settled = performance.now();
      const { rows } = await this.db.ctl.query(
        `select status, count(*)::int as n from ai_runs where kind = $1 group by status`,
        [ENGINE_KIND],
      );
      const counts: Record<string, number> = Object.fromEntries(rows.map((r) => [r.status, r.n]));
      const bad = ['failed', 'dead_lettered', 'cancelled', 'waiting'].filter((s) => counts[s]);
      if (bad.length) throw new Error(`engine runs ended badly: ${JSON.stringify(counts)}`);
      if (!counts.pending && !counts.running) {
        // Let the claim the worker sends after its last run settled finish before anything else starts.
        await sleep(20);
        return settled;
      }
      if (performance.now() > deadline) throw new Error(`engine drain timed out: ${JSON.stringify(counts)}`);
      await sleep(2);
    }
  }

  /** A few short runs so pool connections have their statements prepared and the code is warm. */
  async warm(runs: number, steps: number): Promise<void> {
    await this.db.insertPending(runs, ENGINE_KIND, steps);
    await this.drainAll();
  }

  /**
   * (2) One run of `steps` compute steps, alone: per-step call duration and writeStep duration;
   * (3) every statement on the engine's pool counted, and the WAL of the steps read back.
   */
  async sequentialRun(steps: number): Promise<SequentialResult> {
    const { run } = await this.runs.start(ENGINE_KIND, { steps });
    const writeStepMs: number[] = [];
    const totalStatements: Record<string, number> = {};
    const stepStatementNames: Record<string, number> = {};
    const undoWrite = patch(
      this.store,
      'writeStep',
      (original) =>
        async function (this: RunStateStore, ...args: Parameters<RunStateStore['writeStep']>) {
          const t0 = performance.now();
          try {
            return await original.apply(this, args);
          } finally {
            writeStepMs.push(performance.now() - t0);
          }
        },
    );
    const pool = this.pool as unknown as { query: (...args: unknown[]) => unknown };
    const undoQuery = patch(
      pool,
      'query',
      (original) =>
        function (this: unknown, ...args: unknown[]) {
          const q = args[0] as string | { name?: string; text: string };
          const text = typeof q === 'string' ? q : q.text;
          const name = (typeof q === 'object' && q.name) || text.trim().replace(/\s+/g, ' ').slice(0, 40);
          totalStatements[name] = (totalStatements[name] ?? 0) + 1;
          if (probe.inStep) {
            probe.statementsInStep++;
            stepStatementNames[name] = (stepStatementNames[name] ?? 0) + 1;
          }
          return original.apply(this, args);
        },
    );
    probe.stepMs = [];
    probe.statementsPerStep = [];
    probe.walPosition = () => this.db.walPosition();
    probe.walFrom = probe.walTo = null;
    probe.active = true;
    try {
      const claimed = await this.worker.tick();
      if (claimed !== 1) throw new Error(`sequential run: claimed ${claimed} runs, expected 1`);
      await this.worker.idle();
      probe.active = false;
      // Count the claim the worker sends after the run settled too.
      await sleep(20);
    } finally {
      probe.active = false;
      probe.inStep = false;
      undoQuery();
      undoWrite();
    }
    const status = (await this.runs.get(run.id))?.status;
    if (status !== 'succeeded') throw new Error(`sequential run ended ${status}`);
    if (probe.stepMs.length !== steps) throw new Error(`recorded ${probe.stepMs.length} of ${steps} steps`);
    return {
      stepMs: probe.stepMs,
      stepsWritten: steps + 1,
      writeStepMs,
      statementsPerStep: probe.statementsPerStep,
      stepStatementNames,
      totalStatements,
      wal: await this.db.walWindow(probe.walFrom, probe.walTo),
    };
  }

  /**
   * (5) One run of `steps` durable transactions, alone: the duration of each call, and every round trip
   * the engine's pg clients make inside it (`Client.prototype.query` of the module's pg, which a
   * checked-out transaction client and the pool's own queries both go through).
   */
  async transactionRun(steps: number): Promise<TransactionRunResult> {
    const { run } = await this.runs.start(TX_KIND, { steps });
    const stepStatementNames: Record<string, number> = {};
    const proto = (this.pool as unknown as { Client: { prototype: { query: (...a: unknown[]) => unknown } } })
      .Client.prototype;
    const undoQuery = patch(
      proto,
      'query',
      (original) =>
        function (this: unknown, ...args: unknown[]) {
          if (probe.inStep) {
            const q = args[0] as string | { name?: string; text: string };
            const text = typeof q === 'string' ? q : q.text;
            const name = (typeof q === 'object' && q.name) || text.trim().replace(/\s+/g, ' ').slice(0, 40);
            probe.statementsInStep++;
            stepStatementNames[name] = (stepStatementNames[name] ?? 0) + 1;
          }
          return original.apply(this, args);
        },
    );
    probe.stepMs = [];
    probe.statementsPerStep = [];
    probe.walPosition = () => this.db.walPosition();
    probe.walFrom = probe.walTo = null;
    probe.active = true;
    try {
      const claimed = await this.worker.tick();
      if (claimed !== 1) throw new Error(`transaction run: claimed ${claimed} runs, expected 1`);
      await this.worker.idle();
    } finally {
      probe.active = false;
      probe.inStep = false;
      undoQuery();
    }
    const status = (await this.runs.get(run.id))?.status;
    if (status !== 'succeeded') throw new Error(`transaction run ended ${status}`);
    if (probe.stepMs.length !== steps)
      throw new Error(`recorded ${probe.stepMs.length} of ${steps} transactions`);
    return {
      stepMs: probe.stepMs,
      roundTripsPerStep: probe.statementsPerStep,
      stepStatementNames,
      wal: await this.db.walWindow(probe.walFrom, probe.walTo),
    };
  }

  /**
   * (2) `runs` runs of `steps` compute steps, the worker's `concurrency` in flight: wall-clock time,
   * steady-state rates (claims, step commits and finishes timed at RunStateStore, the engine's store), client CPU.
   */
  async throughput(runs: number, steps: number, groupCommit?: number): Promise<LoopResult> {
    const configured = this.store.steps.maxInFlight;
    if (groupCommit !== undefined)
      this.store.steps.maxInFlight = this.store.finishes.maxInFlight = groupCommit;
    try {
      return await this.measureThroughput(runs, steps);
    } finally {
      this.store.steps.maxInFlight = this.store.finishes.maxInFlight = configured;
    }
  }

  private async measureThroughput(runs: number, steps: number): Promise<LoopResult> {
    await this.db.insertPending(runs, ENGINE_KIND, steps);
    const meter = new SteadyMeter();
    const undo = [
      patch(
        this.store,
        'claim',
        (original) =>
          async function (this: RunStateStore, ...args: Parameters<RunStateStore['claim']>) {
            const claimed = await original.apply(this, args);
            meter.claimed(claimed.runs.length);
            return claimed;
          },
      ),
      patch(
        this.store,
        'writeStep',
        (original) =>
          async function (this: RunStateStore, ...args: Parameters<RunStateStore['writeStep']>) {
            const out = await original.apply(this, args);
            if (args[5]) meter.step();
            return out;
          },
      ),
      patch(
        this.store,
        'finish',
        (original) =>
          async function (this: RunStateStore, ...args: Parameters<RunStateStore['finish']>) {
            const status = await original.apply(this, args);
            meter.finished();
            return status;
          },
      ),
    ];
    try {
      const t0 = performance.now();
      const { result: t1, cpuUs } = await withCpu(() => this.drainAll());
      return { runs, seconds: (t1 - t0) / 1000, steady: meter.result(), cpuUs };
    } finally {
      undo.forEach((u) => u());
    }
  }

  /** (2) RunRepository.start: `n` starts from `concurrency` callers. */
  async startRuns(n: number, concurrency: number): Promise<{ n: number; seconds: number }> {
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next++ < n) await this.runs.start(ENGINE_KIND, { steps: 3 });
      }),
    );
    return { n, seconds: (performance.now() - t0) / 1000 };
  }

  async close(): Promise<void> {
    await this.worker.idle();
    await sleep(50);
    await this.app.close();
  }
}
