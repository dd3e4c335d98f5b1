import { INestApplication, Injectable } from '@nestjs/common';
import {
  currentRun,
  DurableStep,
  DurableWorkflow,
  LeaseLostError,
  NonRetryableError,
  RunContext,
  RunRepository,
} from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { RunStateStore } from '../../src/store/run-state/run-state.store';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil, driveUntilHeld, gate } from '../helpers/drive';
import { TRAIL } from '../helpers/event-trail';

const calls: Record<string, number> = {};
const count = (name: string) => (calls[name] = (calls[name] ?? 0) + 1);
let failNext: Record<string, number> = {};
let hold: ReturnType<typeof gate> | null = null;
let started: ReturnType<typeof gate> | null = null;

@Injectable()
class Steps {
  @DurableStep({ kind: 'model' })
  async parse(text: string) {
    count('parse');
    return {
      id: 'chatcmpl-1',
      usage: { prompt_tokens: 14000, completion_tokens: 80 },
      items: text.split(','),
    };
  }

  @DurableStep({ retry: { maxAttempts: 1 } })
  async price(items: string[]) {
    count('price');
    if (failNext.price) {
      failNext.price--;
      throw new Error('vendor timeout');
    }
    return items.map((i) => ({ item: i, cents: 100 }));
  }

  @DurableStep({ kind: 'tool', retry: { maxAttempts: 3, initialDelayMs: 1 } })
  async flaky() {
    count('flaky');
    if (failNext.flaky) {
      failNext.flaky--;
      throw new Error('503');
    }
    return 'ok';
  }

  @DurableStep({ kind: 'tool', retry: { maxAttempts: 1 } })
  async quote(total: number) {
    const ctx = currentRun()!;
    const from = ctx.resumePoint<{ sum: number }>();
    let sum = from?.partial.sum ?? 0;
    for (let i = from ? from.item + 1 : 0; i < total; i++) {
      count(`quote-item-${i}`);
      sum += i;
      await ctx.progress(i, { sum });
      if (i === 180 && failNext.quote) {
        failNext.quote--;
        throw new Error('pod moved');
      }
    }
    return { sum, lines: total };
  }

  @DurableStep()
  async slow() {
    count('slow');
    started?.open();
    await hold?.promise;
    return 'slow-done';
  }

  @DurableStep()
  async bad() {
    return { n: 10n };
  }

  @DurableStep({ name: 'renamed' })
  async other() {
    return 1;
  }
}

@DurableWorkflow('three')
class ThreeSteps {
  constructor(private readonly s: Steps) {}
  async run(input: { text: string }, ctx: RunContext) {
    const parsed = await this.s.parse(input.text);
    const ref = ctx.uuid();
    const at = ctx.now().toISOString();
    const priced = await this.s.price(parsed.items);
    return { priced, ref, at };
  }
}

@DurableWorkflow('flaky')
class FlakyWf {
  constructor(private readonly s: Steps) {}
  async run() {
    return this.s.flaky();
  }
}

@DurableWorkflow('quote')
class QuoteWf {
  constructor(private readonly s: Steps) {}
  async run() {
    return this.s.quote(240);
  }
}

@DurableWorkflow('slow')
class SlowWf {
  constructor(private readonly s: Steps) {}
  async run() {
    await this.s.slow();
    return this.s.other();
  }
}

@DurableWorkflow('bad')
class BadWf {
  constructor(private readonly s: Steps) {}
  async run() {
    await this.s.other();
    return this.s.bad();
  }
}

@DurableWorkflow('fatal')
class FatalWf {
  async run() {
    count('fatal');
    throw new NonRetryableError('card declined permanently');
  }
}

describe('durable steps (in process)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;

  beforeAll(async () => {
    db = await createTestDatabase('steps');
    app = await bootApp(db.url, [Steps, ThreeSteps, FlakyWf, QuoteWf, SlowWf, BadWf, FatalWf], {
      defaultMaxAttempts: 3,
      reconciler: { backoffBaseMs: 1, backoffMaxMs: 5 },
      redact: (type, payload) => (type === 'run.created' ? { ...payload, redacted: true } : payload),
    });
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });
  beforeEach(() => {
    for (const k of Object.keys(calls)) delete calls[k];
    failNext = {};
  });

  it('runs steps, commits one checkpoint each, and writes the event trail in order', async () => {
    const { run } = await runs.start('three', { text: 'a,b' });
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');
    expect(done.output).toMatchObject({
      priced: [
        { item: 'a', cents: 100 },
        { item: 'b', cents: 100 },
      ],
    });
    const cps = await runs.checkpoints(run.id);
    expect(cps.map((c) => c.stepName)).toEqual(['Steps.parse', '$uuid', '$now', 'Steps.price']);
    expect(cps[0].meta).toEqual({
      usage: { prompt_tokens: 14000, completion_tokens: 80 },
      requestId: 'chatcmpl-1',
    });
    const events = await runs.events(run.id);
    expect(events.map((e) => e.type)).toEqual([
      'run.created',
      'run.claimed',
      'model.call_started',
      'run.checkpoint_saved',
      'run.checkpoint_saved',
      'run.succeeded',
    ]);
    expect(events[0].payload).toMatchObject({ redacted: true });
    expect(events.slice(1).every((e) => e.epoch === 1)).toBe(true);
  });

  it('replays committed steps from checkpoints and keeps recorded values across a resume', async () => {
    failNext.price = 1;
    const { run } = await runs.start('three', { text: 'x' });
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');
    expect(calls.parse).toBe(1);
    expect(calls.price).toBe(2);
    const events = await runs.events(run.id);
    const retry = events.find((e) => e.type === 'run.retry_scheduled')!;
    expect(retry).toMatchObject({ epoch: 1, payload: { error: 'vendor timeout' } });
    expect(events.filter((e) => e.type === 'run.claimed').map((e) => e.epoch)).toEqual([1, 2]);
    // The values were recorded under epoch 1 and the resumed run (epoch 2) returned the same ones.
    const cps = await runs.checkpoints(run.id);
    const rec = (n: string) => cps.find((c) => c.stepName === n)!;
    expect(rec('$uuid').epoch).toBe(1);
    expect(rec('$now').epoch).toBe(1);
    expect(done.output).toMatchObject({ ref: rec('$uuid').output, at: rec('$now').output });
    expect(done.epoch).toBe(2);
  });

  it('retries a step inside one claim per its policy', async () => {
    failNext.flaky = 2;
    const { run } = await runs.start('flaky', {});
    const done = await driveUntil(app, db, run.id);
    expect(done).toMatchObject({ status: 'succeeded', output: 'ok', epoch: 1 });
    expect(calls.flaky).toBe(3);
  });

  it('dead-letters after max_attempts claims of a transient failure, keeps the error, and retry() re-drives it', async () => {
    failNext.flaky = 100;
    const { run } = await runs.start('flaky', {});
    const dead = await driveUntil(app, db, run.id);
    expect(dead.status).toBe('dead_lettered');
    expect(calls.flaky).toBe(9); // 3 claims × 3 in-claim attempts
    expect(dead.error).toMatchObject({ message: '503', name: 'Error' });
    expect(dead.error?.stack).toContain('flaky');
    expect(dead.parkedReason).toContain('attempts exhausted (3/3)');
    failNext.flaky = 0;
    await runs.retry(run.id, 'ops@example.com');
    const again = await driveUntil(app, db, run.id);
    expect(again.status).toBe('succeeded');
    expect((await runs.events(run.id)).map((e) => e.type)).toContain('run.retried');
  });

  it('fails at once on NonRetryableError, with no retry', async () => {
    const { run } = await runs.start('fatal', {});
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('failed');
    expect(done.error).toMatchObject({ code: 'DURABLE_NON_RETRYABLE', message: 'card declined permanently' });
    // One claim, no retry (the body's own count also includes the replay check's run of it).
    expect(done.epoch).toBe(1);
    expect((await runs.events(run.id)).map((e) => e.type)).toEqual([
      'run.created',
      'run.claimed',
      'run.failed',
    ]);
    expect(calls.fatal).toBeGreaterThanOrEqual(1);
  });

  it('resumes a 240-item loop after its last recorded item, not at 0', async () => {
    failNext.quote = 1;
    const { run } = await runs.start('quote', {});
    const done = await driveUntil(app, db, run.id);
    expect(done).toMatchObject({ status: 'succeeded', output: { sum: (239 * 240) / 2, lines: 240 } });
    for (let i = 0; i < 240; i++) expect(calls[`quote-item-${i}`]).toBe(1);
  });

  it('rejects a step output that is not JSON, naming the step, and commits nothing for it', async () => {
    const { run } = await runs.start('bad', {});
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('failed');
    expect(done.error?.message).toContain('output of step "Steps.bad"');
    expect(done.error?.code).toBe('DURABLE_NOT_SERIALIZABLE');
    expect((await runs.checkpoints(run.id)).map((c) => c.stepName)).toEqual(['renamed']);
  });

  it('holds the run with NonDeterminismError naming both steps when the recorded order differs; a retry after the fix resumes it', async () => {
    const { run } = await runs.start('slow', {});
    // As if an earlier deploy's code had run and recorded another step first (epoch 1).
    await db.query(`update ai_runs set epoch = 1 where id = $1`, [run.id]);
    await db.query(
      `insert into ai_checkpoints (run_id, step_index, step_name, output, epoch) values ($1, 0, 'Steps.removedStep', '1', 1)`,
      [run.id],
    );
    const held = await driveUntilHeld(app, db, run.id);
    // Held for a fixed deploy (invariant 21), not failed for good: no due time, its error kept.
    expect(held).toMatchObject({ status: 'waiting', error: { code: 'DURABLE_NON_DETERMINISM' } });
    const [{ forever }] = await db.query(
      `select available_at = 'infinity' as forever from ai_runs where id = $1`,
      [run.id],
    );
    expect(forever).toBe(true);
    expect(held.error?.message).toContain('"Steps.removedStep"');
    expect(held.error?.message).toContain('"Steps.slow"');
    expect(calls.slow).toBeUndefined();
    expect((await runs.events(run.id)).map((e) => e.type)).toContain('run.held');
    // The "fixed deploy": the record no longer disagrees; an operator retries the held run.
    await db.query(
      `update ai_checkpoints set step_name = 'Steps.slow', output = '"slow-done"' where run_id = $1`,
      [run.id],
    );
    await runs.retry(run.id, 'ops');
    expect((await driveUntil(app, db, run.id)).status).toBe('succeeded');
  });

  it('a stale executor gets LeaseLostError and writes nothing after the takeover', async () => {
    hold = gate();
    started = gate();
    const { run } = await runs.start('slow', {});
    const worker = app.get(DurableWorker);
    await worker.tick();
    await started.promise; // worker A is inside the step
    // Takeover: the lease lapses and worker B claims (epoch 2).
    await db.query(
      `update ai_runs set status = 'waiting', worker_id = null, lease_expires_at = null where id = $1`,
      [run.id],
    );
    const lease = app.get(RunStateStore);
    const {
      runs: [claimB],
    } = await lease.claim('worker-B', ['slow'], 1);
    expect(claimB.epoch).toBe(2);
    const takeoverEventId = Number((await db.query(`select max(id) as id from ${TRAIL} t`))[0].id);
    hold.open();
    await worker.idle();
    const after = (await runs.get(run.id))!;
    expect(after).toMatchObject({ status: 'running', workerId: 'worker-B', epoch: 2 });
    expect(await runs.checkpoints(run.id)).toHaveLength(0);
    const late = await db.query(`select * from ${TRAIL} t where run_id = $1 and id > $2`, [
      run.id,
      takeoverEventId,
    ]);
    expect(late).toHaveLength(0);
    // And the fenced write itself reports the loss with a typed error.
    await expect(
      lease.writeStep(
        { runId: run.id, workerId: worker.id, epoch: 1 },
        { step: 0, name: 'x', status: 'done', attempt: 1, item: null },
        [],
        'run.checkpoint_saved',
        {},
        true,
      ),
    ).rejects.toBeInstanceOf(LeaseLostError);
    hold = null;
    started = null;
  });

  it('a cancel request stops a running run at the next step boundary', async () => {
    hold = gate();
    started = gate();
    const { run } = await runs.start('slow', {});
    const worker = app.get(DurableWorker);
    await worker.tick();
    await started.promise;
    await runs.cancel(run.id, 'user abort');
    hold.open();
    await worker.idle();
    const after = (await runs.get(run.id))!;
    expect(after.status).toBe('cancelled');
    expect((await runs.checkpoints(run.id)).map((c) => c.stepName)).toEqual(['Steps.slow']);
    hold = null;
    started = null;
  });

  it('outside a run a decorated method is the plain method', async () => {
    const s = app.get(Steps);
    await expect(s.price(['q'])).resolves.toEqual([{ item: 'q', cents: 100 }]);
    expect(calls.price).toBe(1);
  });
});
