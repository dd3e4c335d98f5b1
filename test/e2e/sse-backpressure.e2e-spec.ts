import { Controller, Headers, INestApplication, Injectable, Param, Query, Req, Sse } from '@nestjs/common';
import { connect, Socket } from 'node:net';
import {
  currentRun,
  DurableStep,
  DurableWorkflow,
  RunContext,
  runEventStream,
  RunRepository,
  SseSocket,
} from '../../src';
import { RunStreamReader } from '../../src/api/run-stream';
import { FOLLOWER_WINDOW_BYTES } from '../../src/api/stream-fanout';
import { DurableWorker } from '../../src/engine/worker.service';
import { STREAM_PAGE_BYTES } from '../../src/store/stream.store';
import { bootHttpApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { gate } from '../helpers/drive';
import { waitFor } from '../helpers/processes';
import { readSse } from '../helpers/sse';

/**
 * Issue 46 part 4: SSE with backpressure. `runEventStream` given the request's socket takes the next
 * entry only once the previous one was written out: a client that does not read makes the server take
 * (and hold) one entry more than what the kernel's buffers accepted, instead of the whole stream queued
 * in Nest's writer (4 MiB of characters, plus 32 messages in its SseStream) until it is dropped; the
 * entries it is not given wait in the run's shared reader, which holds at most its window for it.
 */
const SIZE = 1_000_000; // characters of each entry's pad: about 1 MB of JSON
const N = 40; // 40 MB in all

const go = gate();

@Injectable()
class BigEmits {
  @DurableStep()
  async emitAll() {
    await go.promise;
    for (let i = 1; i <= N; i++) await currentRun()!.emit('chunk', { i, pad: 'x'.repeat(SIZE) });
    return N;
  }
}

@DurableWorkflow('big-emits')
class BigEmitter {
  constructor(private readonly steps: BigEmits) {}
  async run(_: unknown, ctx: RunContext) {
    await ctx.emit('begin', {});
    return this.steps.emitAll();
  }
}

/** The bytes of entry data each client (`?who=`) made the server take off the run's stream. */
const taken = new Map<string, number>();

@Controller('paced')
class PacedController {
  constructor(private readonly runs: RunRepository) {}
  @Sse(':id/stream')
  stream(
    @Param('id') id: string,
    @Query('who') who: string,
    @Req() req: { socket: SseSocket },
    @Headers('last-event-id') last?: string,
  ) {
    return runEventStream(this.runs, id, {
      lastEventId: last,
      pollMs: 5000,
      socket: req.socket,
      data: (e) => {
        taken.set(who, (taken.get(who) ?? 0) + JSON.stringify(e.data).length);
        return e;
      },
    });
  }
}

let db: TestDatabase;
let app: INestApplication;
let http: string;

beforeAll(async () => {
  db = await createTestDatabase('sse_backpressure');
  ({ app, http } = await bootHttpApp(db.url, {
    providers: [BigEmits, BigEmitter],
    controllers: [PacedController],
  }));
}, 60_000);
afterAll(async () => {
  go.open();
  await app?.get(DurableWorker).idle();
  await app?.close();
  await db?.drop();
});

/** GET the stream with a raw socket that never reads what it is sent. */
function deafClient(id: string, who: string): Socket {
  const { port } = new URL(http);
  const s = connect(Number(port), '127.0.0.1');
  s.write(`GET /paced/${id}/stream?who=${who} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n`);
  s.pause();
  s.on('error', () => undefined);
  return s;
}

describe('SSE backpressure', () => {
  it('a client that does not read takes a bounded amount; a reading client still gets every entry', async () => {
    const runs = app.get(RunRepository);
    const reader = app.get(RunStreamReader);
    const id = (await runs.start('big-emits', {})).run.id;
    const ticking = app.get(DurableWorker).tick();
    await waitFor(async () => (await runs.stream(id)).length === 1, 10_000, 'the begin entry');

    const deaf = deafClient(id, 'deaf');
    const reading = readSse(`${http}/paced/${id}/stream?who=reader`);
    await waitFor(async () => reader.fanout.held(id).length === 2, 10_000, 'both clients following');
    let held = 0;
    const watch = setInterval(() => (held = Math.max(held, ...reader.fanout.held(id))), 5);
    go.open();
    await ticking;
    await app.get(DurableWorker).idle();
    const got = await reading;
    clearInterval(watch);
    expect(got.filter((m) => m.event !== 'end').map((m) => Number(m.id))).toEqual(
      Array.from({ length: N + 1 }, (_, i) => i + 1),
    );
    expect(got[got.length - 1]).toMatchObject({ event: 'end', data: { status: 'succeeded' } });

    // The deaf client took what the loopback's socket buffers hold (a few MB, outside the heap) and
    // one entry in the server's socket buffer; before, every entry was taken and queued for it.
    await new Promise((r) => setTimeout(r, 300));
    const deafTaken = taken.get('deaf') ?? 0;
    expect(deafTaken).toBeGreaterThan(0);
    expect(deafTaken).toBeLessThan(12 * SIZE); // 39 MB before (measured 5 MB now)
    expect(held).toBeLessThanOrEqual(FOLLOWER_WINDOW_BYTES + STREAM_PAGE_BYTES + SIZE + 100);
    expect(deaf.destroyed).toBe(false); // held at its pace, not dropped
    deaf.destroy();
    await waitFor(async () => reader.openClients === 0, 10_000, 'every slot given back');
  }, 120_000);
});
