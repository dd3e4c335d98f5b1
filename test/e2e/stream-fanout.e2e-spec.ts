import { Controller, Headers, INestApplication, Injectable, Param, Sse, UseFilters } from '@nestjs/common';
import { connect, Socket } from 'node:net';
import { request } from 'node:http';
import {
  currentRun,
  DurableExceptionFilter,
  DurableStep,
  DurableWorkflow,
  RunContext,
  runEventStream,
  RunRepository,
} from '../../src';
import { RunStreamReader } from '../../src/api/run-stream';
import { FOLLOWER_WINDOW_BYTES } from '../../src/api/stream-fanout';
import { DurableWorker } from '../../src/engine/worker.service';
import { STREAM_PAGE_BYTES, StreamStore } from '../../src/store/stream.store';
import { bootHttpApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { gate } from '../helpers/drive';
import { waitFor } from '../helpers/processes';
import { readSse } from '../helpers/sse';

/**
 * Issue 36, section 5 (streams): the SSE clients and watchers of one run share one reader of its stream
 * (one read per new entry, not one per client); a process serves at most `limits.maxStreamClients` SSE
 * clients (then 503 before any byte); a read returns about 1 MiB of entries at most, and a watcher that
 * does not take its entries is detached instead of making the process hold the stream for it.
 */

const gates = new Map<string, ReturnType<typeof gate>>();

@Injectable()
class FanSteps {
  /** Waits for its gate, then emits `n` entries of `size` characters, `delayMs` apart. */
  @DurableStep()
  async chunks(id: string, n: number, size: number, delayMs: number) {
    await gates.get(id)?.promise;
    for (let i = 1; i <= n; i++) {
      await currentRun()!.emit('chunk', { i, pad: 'x'.repeat(size) });
      if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
    }
    return n;
  }
}

@DurableWorkflow('fan')
class Fan {
  constructor(private readonly steps: FanSteps) {}
  async run(input: { id: string; n: number; size?: number; delayMs?: number }, ctx: RunContext) {
    await ctx.emit('begin', {});
    return this.steps.chunks(input.id, input.n, input.size ?? 10, input.delayMs ?? 0);
  }
}

@Controller('fan')
@UseFilters(DurableExceptionFilter)
class FanController {
  constructor(private readonly runs: RunRepository) {}
  @Sse(':id/stream')
  stream(@Param('id') id: string, @Headers('last-event-id') last?: string) {
    return runEventStream(this.runs, id, { lastEventId: last, pollMs: 5000 });
  }
}

const CAP = 50;
let db: TestDatabase;
let app: INestApplication;
let http: string;
let runs: RunRepository;
let reader: RunStreamReader;
/** Each read of a stream (StreamStore.read): its run and the bytes of data it returned. */
const reads: { runId: string; bytes: number }[] = [];

beforeAll(async () => {
  db = await createTestDatabase('stream_fanout');
  ({ app, http } = await bootHttpApp(db.url, {
    providers: [FanSteps, Fan],
    controllers: [FanController],
    options: { limits: { maxStreamClients: CAP } },
  }));
  runs = app.get(RunRepository);
  reader = app.get(RunStreamReader);
  const store = app.get(StreamStore);
  const read = store.read.bind(store);
  jest.spyOn(store, 'read').mockImplementation(async (runId, ...rest) => {
    const page = await read(runId, ...rest);
    reads.push({ runId, bytes: page?.sizes.reduce((a, b) => a + b, 0) ?? 0 });
    return page;
  });
});
afterAll(async () => {
  for (const g of gates.values()) g.open();
  await app?.get(DurableWorker).idle();
  await app?.close();
  await db?.drop();
});

const readsOf = (runId: string) => reads.filter((r) => r.runId === runId);

/** Starts a `fan` run and runs it up to its gate (its `begin` entry written); `go` runs the rest. */
async function gatedRun(n: number, size?: number, delayMs?: number) {
  const key = `g${gates.size}`;
  gates.set(key, gate());
  const id = (await runs.start('fan', { id: key, n, size, delayMs })).run.id;
  const ticking = app.get(DurableWorker).tick();
  await waitFor(async () => (await runs.stream(id)).length === 1, 10_000, 'the begin entry');
  return {
    id,
    go: async () => {
      gates.get(key)!.open();
      await ticking;
      await app.get(DurableWorker).idle();
    },
  };
}

/** GET the stream with a raw socket that never reads what it is sent. */
function deafClient(id: string): Socket {
  const { port } = new URL(http);
  const s = connect(Number(port), '127.0.0.1');
  s.write(`GET /fan/${id}/stream HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n`);
  s.pause();
  s.on('error', () => undefined);
  return s;
}

describe('stream fan-out', () => {
  it('50 SSE clients of a run cause about as many reads of its stream as 1', async () => {
    const liveReads: number[] = [];
    for (const clients of [1, 50]) {
      const { id, go } = await gatedRun(10, 10, 40);
      const reading = Array.from({ length: clients }, () => readSse(`${http}/fan/${id}/stream`));
      await waitFor(async () => reader.fanout.held(id).length === clients, 10_000, 'every client following');
      const before = readsOf(id).length;
      await go();
      const got = await Promise.all(reading);
      liveReads.push(readsOf(id).length - before);
      for (const sent of got) {
        expect(sent.filter((m) => m.event !== 'end').map((m) => Number(m.id))).toEqual(
          Array.from({ length: 11 }, (_, i) => i + 1),
        );
        expect(sent[sent.length - 1]).toMatchObject({ event: 'end', data: { status: 'succeeded' } });
      }
    }
    // 10 entries written 40 ms apart: about one read each, however many clients follow the run.
    expect(liveReads[0]).toBeLessThanOrEqual(14);
    expect(liveReads[1]).toBeLessThanOrEqual(liveReads[0] + 4);
    await waitFor(async () => reader.openClients === 0, 10_000, 'every slot given back');
  });

  it('past limits.maxStreamClients a client is refused with a 503 before any byte; a slot freed is reused', async () => {
    const { id, go } = await gatedRun(1);
    const sockets = Array.from({ length: CAP }, () => deafClient(id));
    await waitFor(async () => reader.openClients === CAP, 10_000, 'the clients up to the cap');
    const refused = await new Promise<{ status: number; type: string; body: string }>((resolve, reject) =>
      request(`${http}/fan/${id}/stream`, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () =>
          resolve({ status: res.statusCode!, type: String(res.headers['content-type']), body }),
        );
      })
        .on('error', reject)
        .end(),
    );
    expect(refused.status).toBe(503);
    expect(refused.type).toMatch(/^application\/json/);
    expect(JSON.parse(refused.body)).toMatchObject({ code: 'DURABLE_TOO_MANY_STREAM_CLIENTS' });
    expect(refused.body).toContain('limits.maxStreamClients');

    sockets.pop()!.destroy();
    await waitFor(async () => reader.openClients === CAP - 1, 10_000, 'the slot of the client that left');
    const reading = readSse(`${http}/fan/${id}/stream`);
    await waitFor(async () => reader.openClients === CAP, 10_000, 'a new client in the freed slot');
    for (const s of sockets) s.destroy();
    await go();
    expect((await reading).map((m) => m.event ?? m.id)).toEqual(['1', '2', 'end']);
    await waitFor(async () => reader.openClients === 0, 10_000, 'every slot given back');
  });

  it('a read returns about 1 MiB; a watcher that does not take its entries is detached, then reads on its own', async () => {
    const size = 400_000; // 400,002 bytes of JSON data each
    const { id, go } = await gatedRun(16, size);
    await go();
    const page = await runs.stream(id, { limit: 1000 });
    expect(page.map((e) => e.seq)).toEqual([1, 2, 3, 4]); // begin, then 3 chunks: past 1 MiB after the third

    const slow = runs.watch(id);
    const fast = runs.watch(id);
    const slowFirst = slow.next(); // starts the run's reader at 0 ...
    const fastFirst = fast.next(); // ... which the second watcher joins
    expect((await slowFirst).value).toMatchObject({ seq: 1 });
    const fastSeen = [(await fastFirst).value!.seq];
    let held = 0;
    let detached = false;
    for await (const e of fast) {
      fastSeen.push(e.seq);
      const now = reader.fanout.held(id);
      held = Math.max(held, ...now);
      if (now.length === 1) detached = true;
    }
    expect(fastSeen).toEqual(Array.from({ length: 17 }, (_, i) => i + 1));
    expect(detached).toBe(true);
    expect(held).toBeLessThanOrEqual(FOLLOWER_WINDOW_BYTES + STREAM_PAGE_BYTES + size);
    const slowSeen = [1];
    for await (const e of slow) slowSeen.push(e.seq);
    expect(slowSeen).toEqual(fastSeen);
  });

  it('SSE clients that never read share one read of what is written while they follow', async () => {
    const size = 500_000;
    const n = 24; // 12 MB
    const { id, go } = await gatedRun(n, size);
    const sockets = Array.from({ length: 4 }, () => deafClient(id));
    await waitFor(async () => reader.fanout.held(id).length === 4, 10_000, 'the 4 clients following');
    const before = readsOf(id).length;
    await go();
    await new Promise((r) => setTimeout(r, 500));
    const bytes = readsOf(id)
      .slice(before)
      .reduce((a, r) => a + r.bytes, 0);
    expect(bytes).toBeLessThanOrEqual(n * (size + 20));
    for (const s of sockets) s.destroy();
    await waitFor(async () => reader.openClients === 0, 10_000, 'every slot given back');
  });
});
