import { Controller, Headers, INestApplication, Param, Sse } from '@nestjs/common';
import { Client } from 'pg';
import { runEventStream, RunRepository } from '../../src';
import { bootHttpApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { spawnWorker, waitFor, WorkerProcess } from '../helpers/processes';
import { prepareWorkerSchema } from '../helpers/schema';
import { readSse, Sent } from '../helpers/sse';

@Controller('runs')
class StreamController {
  constructor(private readonly runs: RunRepository) {}
  @Sse(':id/stream')
  stream(@Param('id') id: string, @Headers('last-event-id') last?: string) {
    return runEventStream(this.runs, id, { lastEventId: last, pollMs: 250 });
  }
}

/**
 * Issue 22's done-when for progress streams, with real processes: an HTTP client follows a run's SSE
 * stream (served by an API process that runs no worker) while the worker driving the run is SIGKILLed
 * and another takes it over; the client drops its connection twice and reconnects with Last-Event-ID.
 * It sees every entry exactly once, in order, ending with the `end` event; the body's entries were
 * written once each across the takeover.
 */
describe('SSE through a worker SIGKILL and a takeover', () => {
  let db: TestDatabase;
  let sql: Client;
  let api: { app: INestApplication; http: string };
  const workers: WorkerProcess[] = [];
  const N = 14;

  beforeAll(async () => {
    db = await createTestDatabase('stream_procs');
    await prepareWorkerSchema(db.url);
    sql = new Client({ connectionString: db.url });
    await sql.connect();
    api = await bootHttpApp(db.url, { controllers: [StreamController] });
  });
  afterAll(async () => {
    for (const w of workers) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.exited));
    await api?.app.close();
    await sql?.end();
    await db?.drop();
  });

  const worker = (id: string) => {
    const w = spawnWorker({
      DB_URL: db.url,
      STREAM: '1',
      WORKER_ID: id,
      LEASE_TTL_MS: '1000',
      STEP_DELAY_MS: '120',
    });
    workers.push(w);
    return w;
  };
  const entries = async (id: string) =>
    (await sql.query(`select seq, topic, data from ai_run_stream where run_id = $1 order by seq`, [id])).rows;

  it('the client sees every entry once, in order, across two reconnects and a takeover', async () => {
    const { rows } = await sql.query(
      `insert into ai_runs (kind, input, max_attempts) values ('streaming', $1, 10) returning id`,
      [{ n: N }],
    );
    const id: string = rows[0].id;
    const url = `${api.http}/runs/${id}/stream`;
    const first = worker('stream-w1');
    await first.ready;

    const seen: Sent[] = [];
    const lastId = () => seen.filter((m) => m.id).slice(-1)[0]?.id;
    // Connection 1: drops after 5 entries, while the first worker drives the run.
    seen.push(...(await readSse(url, undefined, 5)));
    expect(seen.map((m) => m.id)).toEqual(['1', '2', '3', '4', '5']);
    // The first worker is killed mid-run; entries keep coming only once another takes over.
    await waitFor(async () => (await entries(id)).length >= 9, 20_000, 'the run to be well under way');
    first.child.kill('SIGKILL');
    await first.exited;
    const before = (await entries(id)).length;
    const second = worker('stream-w2');
    await second.ready;
    // Connection 2: from Last-Event-ID 5, across the takeover, drops after 8 more.
    seen.push(...(await readSse(url, lastId(), 8)));
    // Connection 3: from there to the end.
    seen.push(...(await readSse(url, lastId())));

    const stored = await entries(id);
    expect(stored.length).toBeGreaterThan(before);
    const sent = seen.filter((m) => m.event !== 'end');
    expect(sent.map((m) => Number(m.id))).toEqual(stored.map((e) => e.seq)); // every entry once, in order
    expect(sent.map((m) => m.data.topic)).toEqual(stored.map((e) => e.topic));
    expect(seen[seen.length - 1]).toMatchObject({ event: 'end', data: { runId: id, status: 'succeeded' } });

    // The body's entries were written once each, across the takeover (recorded, replayed, not rewritten).
    const topics = stored.map((e) => e.topic);
    expect(topics.filter((t) => t === 'begin')).toHaveLength(1);
    expect(topics.filter((t) => t === 'end')).toHaveLength(1);
    const progress = stored.filter((e) => e.topic === 'progress').map((e) => e.data.i);
    expect(progress).toEqual([...Array(N).keys()]);
    // Each step's latest attempt wrote its chunk; a step cut off by the kill may have written one before.
    const read = await api.app.get(RunRepository).stream<{ i: number }>(id, { limit: 1000 });
    const latest = read.filter((e) => e.topic === 'chunk' && !e.superseded).map((e) => e.data.i);
    expect(latest).toEqual([...Array(N).keys()]);
    const claims = await sql.query(
      `select payload->>'workerId' as w from ai_events where run_id = $1 and event_type = 'run.claimed' order by id`,
      [id],
    );
    expect(claims.rows.map((r) => r.w)).toEqual(expect.arrayContaining(['stream-w1', 'stream-w2']));
    const pids = new Set(
      stored.filter((e) => e.topic === 'chunk').map((e) => (e.data as { pid: number }).pid),
    );
    expect(pids.size).toBe(2);
  });
});
