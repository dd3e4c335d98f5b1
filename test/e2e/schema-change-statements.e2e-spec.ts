import { INestApplication, Injectable } from '@nestjs/common';
import type { Pool } from 'pg';
import {
  CommandContext,
  currentRun,
  DurableStep,
  DurableTransaction,
  DurableTransactionHost,
  DurableWorkflow,
  IdempotentCommand,
  NonRetryableError,
  LeaseService,
  OnRunCancel,
  RunContext,
  RunRepository,
} from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { Reconciler } from '../../src/maintenance/reconciler.service';
import { AdminRunsStore } from '../../src/store/admin-runs.store';
import { DurableDatabase } from '../../src/store/durable-database';
import { RunReadStore } from '../../src/store/run-reads.store';
import { RunStateStore } from '../../src/store/run-state/run-state.store';
import { RunStatsReader } from '../../src/store/run-stats.reader';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil, gate } from '../helpers/drive';
import {
  namedStatementsInSrc,
  NamedCall,
  preparedOnPool,
  preparedTexts,
  recordNamedCalls,
  replanAfter,
} from '../helpers/named-statements';
import { waitFor } from '../helpers/processes';

/** Command keys whose first send ends without an answer (the command goes in doubt once). */
const doubted = new Set<string>();
let held = gate();
const reached = new Set<string>();

@Injectable()
class Kit {
  constructor(private readonly tx: DurableTransactionHost) {}

  @DurableStep()
  async plain(n: number) {
    return n + 1;
  }
  @DurableStep()
  async counted(total: number) {
    const ctx = currentRun()!;
    let sum = 0;
    for (let i = 0; i < total; i++) await ctx.progress(i, { sum: (sum += i) });
    return sum;
  }
  @IdempotentCommand({ name: 'send', inDoubt: 'retry-with-key' })
  async send(args: { n: number }, ctx?: CommandContext) {
    if (!doubted.has(ctx!.idempotencyKey)) {
      doubted.add(ctx!.idempotencyKey);
      throw new Error('socket hang up');
    }
    return { sent: args.n };
  }
  @IdempotentCommand({ name: 'wire', inDoubt: 'retry-with-key', requiresApproval: () => true })
  async wire(args: { n: number }) {
    return { wired: args.n };
  }
  @DurableTransaction()
  async book(n: number) {
    await this.tx.client.query('select 1');
    return n;
  }
  @DurableStep({ name: 'ask', kind: 'model', budget: 'tpm' })
  async ask() {
    return { text: 'ok', usage: { total_tokens: 5 } };
  }
  @DurableStep()
  async slow(runId: string) {
    reached.add(runId);
    await held.promise;
    return 'slow';
  }
}

@DurableWorkflow('stmt-forever')
class Forever {
  async run(_input: unknown, ctx: RunContext) {
    return ctx.waitForSignal('never');
  }
}

/**
 * Every engine write a run makes: tags, progress, stream, a command in doubt, one awaiting approval, a
 * transaction, a model budget, a sleep, a signal, a child given up on, continue-as-new.
 */
@DurableWorkflow('stmt-every')
class Every {
  constructor(private readonly kit: Kit) {}
  async run(input: { turn: number }, ctx: RunContext) {
    if (input.turn > 0) return this.kit.plain(input.turn);
    await ctx.setTags({ phase: 'one' });
    await this.kit.counted(3);
    await ctx.emit('progress', { n: 1 });
    await this.kit.send({ n: 1 });
    await this.kit.wire({ n: 1 });
    await this.kit.book(1);
    await this.kit.ask();
    await ctx.sleep(1);
    await ctx.waitForSignal('go', { timeoutMs: 60_000 });
    const child = await ctx.startChild(Forever, {});
    await ctx.waitForChild(child, { timeoutMs: 1 }).catch(() => undefined);
    return ctx.continueAsNew({ turn: 1 });
  }
}

@DurableWorkflow('stmt-pair')
class Pair {
  constructor(private readonly kit: Kit) {}
  async run(input: { n: number }) {
    return this.kit.plain(await this.kit.plain(input.n));
  }
}

@DurableWorkflow('stmt-fails')
class Fails {
  constructor(private readonly kit: Kit) {}
  async run(input: { n: number }) {
    await this.kit.plain(input.n);
    throw new NonRetryableError('fails, for a rewind in place');
  }
}

@DurableWorkflow('stmt-cleanup')
class Cleanup implements OnRunCancel<unknown> {
  constructor(private readonly kit: Kit) {}
  async run(_input: unknown, ctx: RunContext) {
    return this.kit.slow(ctx.runId);
  }
  async onCancel() {
    await this.kit.plain(0);
  }
}

@DurableWorkflow('stmt-digest', { debounce: { periodMs: 600_000, key: (i: { user: string }) => i.user } })
class Digest {
  async run(input: { user: string }) {
    return input;
  }
}

/**
 * Issue 48, part 1: a migration that adds columns must not break a running process. PostgreSQL refuses
 * to run a named prepared statement again once its result's row type changed (0A000 "cached plan must
 * not change result type"), so no statement the library prepares may return `*` of a table. A process
 * on a pool of one connection runs every named statement of src (each at least once: the set is read
 * from the code), every table of the schema gets a column, and the same process on the same connections
 * runs them all again: none fails, and each describes the same result columns as before.
 */
describe('named statements survive a migration that adds columns', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let pool: Pool;
  let recorder: ReturnType<typeof recordNamedCalls>;

  beforeAll(async () => {
    db = await createTestDatabase('stmt_schema');
    app = await bootApp(db.url, [Kit, Forever, Every, Pair, Fails, Cleanup, Digest], {
      database: { url: db.url, poolSize: 1 },
      worker: { concurrency: 10, groupCommit: 1 },
      budgets: { tpm: { tokens: 1_000_000, periodMs: 60_000, estimateTokens: 10 } },
    });
    pool = app.get(DurableDatabase).pool;
    // The same connection all along: none closed for being idle between the phases.
    (pool.options as { idleTimeoutMillis?: number }).idleTimeoutMillis = 0;
    recorder = recordNamedCalls();
  });
  afterAll(async () => {
    recorder?.stop();
    await app?.close();
    await db?.drop();
  });

  /** Runs every named statement through the module: the run API, a worker, the reconciler, the stores. */
  async function exercise(tag: string): Promise<void> {
    const runs = app.get(RunRepository);
    const worker = app.get(DurableWorker);
    const { run } = await runs.start(Every, { turn: 0 }, { idempotencyKey: `every-${tag}` });
    await runs.start(Every, { turn: 0 }, { idempotencyKey: `every-${tag}` }); // the key's holder read back
    await runs.signal(run.id, 'go', {});
    const approval = async () =>
      (
        await db.query(
          `select idempotency_key from ai_commands where run_id = $1 and status = 'awaiting_approval'`,
          [run.id],
        )
      )[0]?.idempotency_key;
    await waitFor(
      async () => {
        await db.query(
          `update ai_runs set available_at = now() where id = $1 and status = 'waiting' and available_at < 'infinity'`,
          [run.id],
        );
        await worker.tick();
        await worker.idle();
        return (await approval()) !== undefined;
      },
      10_000,
      'the command to await approval',
    );
    await runs.approve(run.id, await approval(), { by: 'test' });
    expect((await driveUntil(app, db, run.id, ['succeeded'])).status).toBe('succeeded');
    expect(await runs.result(run.id)).toBe(2);
    expect(await runs.stream(run.id)).toHaveLength(1);
    await runs.start(Digest, { user: tag });

    // Group commit: six runs' step writes and finishes queue behind one in flight and go as one batch.
    const pairs = await Promise.all(Array.from({ length: 6 }, (_, n) => runs.start(Pair, { n })));
    await worker.tick();
    await worker.idle();
    for (const p of pairs) expect((await runs.get(p.run.id))!.status).toBe('succeeded');
    // A fork of one, from its second step: planned, inserted with the first step's record, then run.
    const { run: fork } = await runs.fork(pairs[0].run.id, { fromStep: 1 });
    expect((await driveUntil(app, db, fork.id)).status).toBe('succeeded');
    // A rewind in place of a failed run, from its second step: it fails again, under its own id.
    const { run: failing } = await runs.start(Fails, { n: 1 });
    expect((await driveUntil(app, db, failing.id)).status).toBe('failed');
    await runs.fork(failing.id, { fromStep: 1, inPlace: true });
    expect((await driveUntil(app, db, failing.id)).status).toBe('failed');

    // A cancel while a step runs: the heartbeat brings it, the cleanup begins.
    held = gate();
    const { run: c } = await runs.start(Cleanup, {});
    await worker.tick();
    await waitFor(async () => reached.has(c.id), 5000, 'the slow step to run');
    await runs.cancel(c.id, 'test');
    await worker.heartbeat();
    held.open();
    await worker.idle();
    expect((await driveUntil(app, db, c.id)).status).toBe('cancelled');

    // What no run of this worker sends: a limited claim, the reconciler, an operator, the admin, observability.
    const dx = app.get(DurableDatabase);
    await app.get(RunStateStore).claim('nobody', ['stmt-none'], 1, [], true);
    // The hand-off's own statements (this worker takes none: it runs off its schedule): a handed run's
    // read, and a stopping worker's withdraw and hand-back.
    await app.get(RunStateStore).readHandoff(run.id, 'nobody');
    await app.get(RunStateStore).closeHandoffs('nobody', () => []);
    await app.get(Reconciler).sweep();
    await app.get(LeaseService).releaseWorker('nobody');
    await new AdminRunsStore(dx).version(run.id);
    await app.get(RunStatsReader).read();
    await app.get(RunStatsReader).backlog();
    await app.get(RunReadStore).traceparentOf(run.id);
  }

  const columnsByName = (calls: NamedCall[]) =>
    Object.fromEntries(calls.filter((c) => !c.error).map((c) => [c.name, c.columns]));
  const errors = (calls: NamedCall[]) => calls.filter((c) => c.error).map((c) => `${c.name}: ${c.error}`);

  it('runs every named statement again after a column is added to every table', async () => {
    const inSrc = [...namedStatementsInSrc()].sort();
    expect(inSrc.length).toBeGreaterThan(30);

    await exercise('before');
    const before = recorder.calls.splice(0);
    expect(errors(before)).toEqual([]);
    expect([...new Set(before.map((c) => c.name))].sort()).toEqual(inSrc);
    const prepared = await preparedOnPool(pool);
    expect(prepared.size).toBe(1);
    expect([...new Set([...prepared.values()].flat())].sort()).toEqual(inSrc);

    // A future migration: one more column on every table of the module's schema. Each statement, as
    // the pool prepared it, is prepared again on a probe connection first and replanned after it.
    const tables: Array<{ name: string }> = await db.query(
      `select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = 'public' and c.relkind in ('r', 'p') and not c.relispartition order by 1`,
    );
    expect(tables.map((t) => t.name)).toEqual(
      expect.arrayContaining(['ai_runs', 'ai_events', 'ai_checkpoints', 'ai_commands', 'ai_signals']),
    );
    const texts = await preparedTexts(pool);
    expect(texts.map((t) => t.name)).toEqual(inSrc);
    const replanned = await replanAfter(db.url, texts, async () => {
      for (const t of tables) await db.query(`alter table ${t.name} add column zz_future int`);
    });

    const failed = await exercise('after').then(
      () => null,
      (err: Error) => err.message,
    );
    const after = recorder.calls.splice(0);
    // Nothing failed: not a statement replanned on the probe, not one the process ran, not a call.
    expect({ replanned, ran: errors(after), failed }).toEqual({ replanned: [], ran: [], failed: null });
    expect([...new Set(after.map((c) => c.name))].sort()).toEqual(inSrc);
    // The same connection as before: each statement ran again where it was prepared.
    expect([...(await preparedOnPool(pool)).keys()]).toEqual([...prepared.keys()]);
    expect([...new Set(after.map((c) => c.pid))]).toEqual([...prepared.keys()]);
    // Each statement describes the same result columns before and after.
    expect(columnsByName(after)).toEqual(columnsByName(before));
  });
});
