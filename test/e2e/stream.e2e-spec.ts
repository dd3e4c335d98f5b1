import { Controller, Headers, INestApplication, Injectable, Param, Sse } from '@nestjs/common';
import { request } from 'node:http';
import { readSse } from '../helpers/sse';
import {
  currentRun,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  RunContext,
  runEventStream,
  RunRepository,
  StreamEntry,
} from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { bootHttpApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { gate, tickUntilStatus } from '../helpers/drive';
import { waitFor } from '../helpers/processes';

const gates = new Map<string, ReturnType<typeof gate>>();
const flaky = new Map<string, number>();

@Injectable()
class Steps {
  /** Emits one entry per item, then returns how many (throws once first for `flaky` ids). */
  @DurableStep({ retry: { maxAttempts: 3, initialDelayMs: 1, maxDelayMs: 5 } })
  async price(id: string, items: number) {
    for (let i = 1; i <= items; i++) await currentRun()!.emit('pricing', { i, of: items });
    const left = flaky.get(id) ?? 0;
    if (left > 0) {
      flaky.set(id, left - 1);
      throw new Error('supplier timed out');
    }
    await gates.get(`${id}:price`)?.promise;
    return items;
  }

  @IdempotentCommand({ name: 'notify', inDoubt: 'retry-with-key' })
  async notify(_to: string) {
    await currentRun()!.emit('not-here', {});
    return 'sent';
  }
}

@DurableWorkflow('streamer')
class Streamer {
  constructor(private readonly s: Steps) {}
  async run(input: { id: string; items: number; wait?: boolean; badTopic?: boolean }, ctx: RunContext) {
    await ctx.emit('phase', { name: 'parse' });
    if (input.badTopic) await ctx.emit('', 1);
    const n = await this.s.price(input.id, input.items);
    await ctx.emit('phase', { name: 'priced', n });
    if (input.wait) await ctx.waitForSignal('approve');
    await ctx.emit('phase', { name: 'done' });
    return n;
  }
}

@DurableWorkflow('bad-emitter')
class BadEmitter {
  constructor(private readonly s: Steps) {}
  async run() {
    return this.s.notify('x');
  }
}

@Controller('runs')
class StreamController {
  constructor(private readonly runs: RunRepository) {}
  @Sse(':id/stream')
  stream(@Param('id') id: string, @Headers('last-event-id') last?: string) {
    return runEventStream(this.runs, id, { lastEventId: last, pollMs: 200 });
  }
}

describe('progress streams: ctx.emit, RunRepository.stream / watch, SSE with Last-Event-ID', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let http: string;
  let runs: RunRepository;
  let worker: DurableWorker;

  beforeAll(async () => {
    db = await createTestDatabase('stream');
    ({ app, http } = await bootHttpApp(db.url, {
      providers: [Steps, Streamer, BadEmitter],
      controllers: [StreamController],
    }));
    runs = app.get(RunRepository);
    worker = app.get(DurableWorker);
  });
  afterAll(async () => {
    for (const g of gates.values()) g.open();
    await worker?.idle();
    await app?.close();
    await db?.drop();
  });

  const drive = (id: string, status: string) => tickUntilStatus(app, id, status);
  const shape = (e: StreamEntry) => [e.seq, e.topic, e.data, e.step, e.attempt, e.superseded];

  it('writes the body’s entries once across a park and a replay, and the step’s entries per attempt', async () => {
    flaky.set('r1', 1);
    const id = (await runs.start('streamer', { id: 'r1', items: 2, wait: true })).run.id;
    await drive(id, 'waiting');
    await runs.signal(id, 'approve', true);
    await drive(id, 'succeeded');
    // The body's emits are recorded (`$emit:phase`): the claim after the signal replays the first two
    // and writes only the last. The step's first attempt threw; its entries are superseded.
    expect((await runs.stream(id)).map(shape)).toEqual([
      [1, 'phase', { name: 'parse' }, null, null, false],
      [2, 'pricing', { i: 1, of: 2 }, 1, 1, true],
      [3, 'pricing', { i: 2, of: 2 }, 1, 1, true],
      [4, 'pricing', { i: 1, of: 2 }, 1, 2, false],
      [5, 'pricing', { i: 2, of: 2 }, 1, 2, false],
      [6, 'phase', { name: 'priced', n: 2 }, null, null, false],
      [7, 'phase', { name: 'done' }, null, null, false],
    ]);
    const marks = await db.query(
      `select step_index, step_name, output from ai_checkpoints where run_id = $1 and step_name like '$emit:%' order by step_index`,
      [id],
    );
    expect(marks).toEqual([
      { step_index: 0, step_name: '$emit:phase', output: { seq: 1 } },
      { step_index: 2, step_name: '$emit:phase', output: { seq: 6 } },
      { step_index: 5, step_name: '$emit:phase', output: { seq: 7 } },
    ]);
    expect(await runs.stream(id, { from: 5, limit: 1 })).toEqual([expect.objectContaining({ seq: 6 })]);
    await expect(runs.stream(id, { limit: 5000 })).rejects.toThrow(/limit must be at most 1000/);
    await expect(runs.stream('00000000-0000-4000-8000-000000000000')).rejects.toThrow(/does not exist/);
  });

  it('watch follows a run live, each entry once in order, and ends with the run; from resumes', async () => {
    gates.set('w1:price', gate());
    const id = (await runs.start('streamer', { id: 'w1', items: 3 })).run.id;
    const seen: number[] = [];
    const watching = (async () => {
      for await (const e of runs.watch(id, { pollMs: 5000 })) seen.push(e.seq);
    })();
    const ticking = worker.tick();
    await waitFor(async () => seen.length >= 4, 10_000, 'the entries before the gate, live');
    expect(seen).toEqual([1, 2, 3, 4]);
    gates.get('w1:price')!.open();
    await ticking;
    await worker.idle();
    await watching; // ended with the run, without waiting for a poll
    expect(seen).toEqual([1, 2, 3, 4, 5, 6]);
    const rest: number[] = [];
    for await (const e of runs.watch(id, { from: 4 })) rest.push(e.seq);
    expect(rest).toEqual([5, 6]);
    const stop = new AbortController();
    stop.abort();
    const none: number[] = [];
    for await (const e of runs.watch(id, { signal: stop.signal })) none.push(e.seq);
    expect(none).toEqual([]);
  });

  it('SSE: a client that drops and reconnects with Last-Event-ID sees every entry once, then an end event', async () => {
    gates.set('s1:price', gate());
    const id = (await runs.start('streamer', { id: 's1', items: 4 })).run.id;
    const ticking = worker.tick();
    const first = await readSse(`${http}/runs/${id}/stream`, undefined, 3);
    expect(first.map((m) => m.id)).toEqual(['1', '2', '3']);
    expect(first[0].data).toMatchObject({ seq: 1, topic: 'phase', data: { name: 'parse' }, step: null });
    gates.get('s1:price')!.open();
    await ticking;
    await worker.idle();
    const second = await readSse(`${http}/runs/${id}/stream`, '3');
    expect(second.filter((m) => m.event !== 'end').map((m) => Number(m.id))).toEqual([4, 5, 6, 7]);
    expect(second[second.length - 1]).toEqual({
      event: 'end',
      id: '7',
      data: { runId: id, status: 'succeeded' },
    });
    const bad = await new Promise<number>((resolve) =>
      request(`${http}/runs/${id}/stream`, { headers: { 'last-event-id': 'x1' } }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      }).end(),
    );
    expect(bad).toBeGreaterThanOrEqual(400);
  });

  it('a stale worker writes no entry; a bad topic and an emit in a command body stop the run as misuse', async () => {
    gates.set('z1:price', gate());
    const id = (await runs.start('streamer', { id: 'z1', items: 0 })).run.id;
    const ticking = worker.tick();
    await waitFor(async () => (await runs.stream(id)).length === 1, 10_000, 'the first entry');
    // Another claim took the run over: this worker's next emit (after the step) is fenced out.
    await db.query(`update ai_runs set epoch = epoch + 1, worker_id = 'other' where id = $1`, [id]);
    gates.get('z1:price')!.open();
    await ticking;
    await worker.idle();
    expect((await runs.stream(id)).map((e) => e.seq)).toEqual([1]);

    const bad = (await runs.start('streamer', { id: 'b1', items: 0, badTopic: true })).run.id;
    await drive(bad, 'failed');
    expect((await runs.get(bad))!.error).toMatchObject({ message: expect.stringMatching(/ctx.emit.*topic/) });
    const cmd = (await runs.start('bad-emitter', {})).run.id;
    await drive(cmd, 'failed');
    expect((await runs.get(cmd))!.error).toMatchObject({
      message: expect.stringMatching(/ctx.emit\(\) must not be called in the body of/),
    });
    expect(await runs.stream(cmd)).toEqual([]);
  });
});
