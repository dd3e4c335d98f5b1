import http2 from 'node:http2';
import net, { AddressInfo } from 'node:net';
import path from 'node:path';
import { WebSocketServer } from 'ws';
import { runDurableMigrations } from '../../src/migrations';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { spawnWorker, waitFor, WorkerProcess } from '../helpers/processes';
import type { SocketClient, SocketSendInput } from '../fixtures/zombie-socket-app';

/**
 * Every write from inside a call is checked, by any socket (issue 44 part 2): a worker frozen
 * (SIGSTOP) inside a command body or a step body, in a 1 s wait of its own before it writes, past its
 * lease; another worker takes the runs over and writes each key once; the first wakes, its overdue
 * timer fires before the lease's deadline timer (so its `ctx.signal` check passes), and it writes:
 * over a WebSocket (`ws`), a raw `net` socket, an http2 session, each opened at boot, and an INSERT
 * into a second PostgreSQL database. Targets that count every write. With the fenced transport on,
 * the zombie's write is refused at the socket (the query when pg submits it, the http2 request where
 * it is made): each key written once. With it off, keys are written twice (the test's power). All
 * clients and both places run in one batch of runs per worker pair (TRIALS keys each).
 */
const FIXTURE = path.join(__dirname, '..', 'fixtures', 'zombie-socket-app.ts');
const TRIALS = 5;
const CLIENTS: SocketClient[] = ['ws', 'net', 'http2', 'pg'];
const PLACES = ['command', 'step'] as const;

describe('fenced transport: a zombie body writes nothing over ws, net, http2 or pg after a takeover', () => {
  let db: TestDatabase;
  let effectsDb: TestDatabase;
  const workers: WorkerProcess[] = [];
  /** Writes received per client and key. */
  const writes: Record<Exclude<SocketClient, 'pg'>, Map<string, number>> = {
    ws: new Map(),
    net: new Map(),
    http2: new Map(),
  };
  const count = (m: Map<string, number>, key: string) => m.set(key, (m.get(key) ?? 0) + 1);
  let wss: WebSocketServer;
  let netServer: net.Server;
  let h2Server: http2.Http2Server;
  const sockets = new Set<net.Socket>();

  beforeAll(async () => {
    effectsDb = await createTestDatabase('zombie_effects');
    await effectsDb.query('create table effects (key text not null)');
    wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    wss.on('connection', (c) => {
      c.on('error', () => undefined);
      c.on('message', (m) => count(writes.ws, m.toString()));
    });
    netServer = net.createServer((s) => {
      sockets.add(s);
      s.on('error', () => undefined);
      let tail = '';
      s.on('data', (d) => {
        const lines = (tail + d.toString()).split('\n');
        tail = lines.pop()!;
        lines.forEach((key) => count(writes.net, key));
      });
    });
    h2Server = http2.createServer();
    // A request counts once its headers arrive, body or not (a target may act on them).
    h2Server.on('stream', (stream, headers) => {
      stream.on('error', () => undefined);
      count(writes.http2, String(headers['x-key']));
      stream.resume();
      stream.on('end', () => {
        stream.respond({ ':status': 200 });
        stream.end();
      });
    });
    await new Promise((r) => wss.once('listening', r));
    await new Promise<void>((r) => netServer.listen(0, '127.0.0.1', r));
    await new Promise<void>((r) => h2Server.listen(0, '127.0.0.1', r));
  });
  afterAll(async () => {
    wss.clients.forEach((c) => c.terminate());
    await new Promise((r) => wss.close(r));
    sockets.forEach((s) => s.destroy());
    await new Promise((r) => netServer.close(r));
    await new Promise((r) => h2Server.close(r));
    await effectsDb.drop();
  });
  beforeEach(async () => {
    db = await createTestDatabase('fenced_sockets');
    await runDurableMigrations({ type: 'postgres', url: db.url });
    Object.values(writes).forEach((m) => m.clear());
    await effectsDb.query('truncate effects');
  });
  afterEach(async () => {
    for (const w of workers.splice(0)) {
      w.child.kill('SIGCONT');
      w.child.kill('SIGKILL');
      await w.exited;
    }
    await db.drop();
  });

  /** Writes per key of one client, the target's ground truth. */
  async function written(client: SocketClient): Promise<Map<string, number>> {
    if (client !== 'pg') return new Map(writes[client]);
    const rows = await effectsDb.query<{ key: string; n: number }>(
      'select key, count(*)::int as n from effects group by key',
    );
    return new Map(rows.map((r) => [r.key, r.n]));
  }

  /** One batch: TRIALS runs per client and place; per case, the keys written and those written twice. */
  async function trial(fenced: boolean): Promise<Record<string, { keys: number; twice: number }>> {
    const env: Record<string, string> = {
      DB_URL: db.url,
      FENCED: fenced ? '1' : '0',
      LEASE_TTL_MS: '1500',
      HEARTBEAT_MS: '400',
      PRE_SEND_MS: '1000',
      SLOTS: String(2 * TRIALS),
      WS_URL: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`,
      NET_PORT: String((netServer.address() as AddressInfo).port),
      H2_URL: `http://127.0.0.1:${(h2Server.address() as AddressInfo).port}`,
      EFFECTS_DB_URL: effectsDb.url,
    };
    const a = spawnWorker(env, FIXTURE);
    workers.push(a);
    await a.ready;
    let inBody = 0;
    a.child.on('message', (m: { at?: string }) => {
      if (m.at) inBody++;
    });
    const inputs: SocketSendInput[] = CLIENTS.flatMap((client) =>
      PLACES.flatMap((where, p) =>
        Array.from({ length: TRIALS }, (_, i) => ({
          client,
          where,
          slot: p * TRIALS + i,
          key: `${client}-${where}-${i}`,
        })),
      ),
    );
    await db.query(`insert into ai_runs (kind, input) select 'zsock', value from jsonb_array_elements($1)`, [
      JSON.stringify(inputs),
    ]);
    await waitFor(
      async () => inBody >= inputs.length,
      20_000,
      `${inputs.length} bodies of worker A to start`,
    );
    a.child.kill('SIGSTOP');
    // The premise: every body of A is frozen before its write.
    for (const client of CLIENTS) expect([...(await written(client)).keys()]).toEqual([]);
    const b = spawnWorker({ ...env, PRE_SEND_MS: '300' }, FIXTURE);
    workers.push(b);
    await b.ready;
    await waitFor(
      async () =>
        (await db.query(`select count(*)::int as n from ai_runs where status = 'succeeded'`))[0].n ===
        inputs.length,
      60_000,
      `worker B to take the ${inputs.length} runs over and finish them`,
    );
    const taken = await db.query(
      `select count(*)::int as n from ai_events where event_type = 'run.claimed' and epoch = 2`,
    );
    expect(taken[0].n).toBe(inputs.length); // every run was taken over
    a.child.kill('SIGCONT');
    // Worker A's bodies go on: each writes now, or is refused at the socket.
    await new Promise((r) => setTimeout(r, 2500));
    const out: Record<string, { keys: number; twice: number }> = {};
    for (const client of CLIENTS) {
      const got = await written(client);
      for (const where of PLACES) {
        const mine = [...got.entries()].filter(([k]) => k.startsWith(`${client}-${where}-`));
        out[`${client} ${where}`] = { keys: mine.length, twice: mine.filter(([, n]) => n > 1).length };
      }
    }
    console.log(`transport ${fenced ? 'on' : 'off'}: ${JSON.stringify(out)}`);
    return out;
  }

  const cases = CLIENTS.flatMap((c) => PLACES.map((w) => `${c} ${w}`));

  it(`with the transport on, each of ${TRIALS} keys per client and place is written once`, async () => {
    const out = await trial(true);
    expect(out).toEqual(Object.fromEntries(cases.map((c) => [c, { keys: TRIALS, twice: 0 }])));
  }, 120_000);

  it("with the transport off, keys are written twice by every client and place (the test's power)", async () => {
    const out = await trial(false);
    for (const c of cases)
      expect({ case: c, keys: out[c].keys, twiceAny: out[c].twice > 0 }).toEqual({
        case: c,
        keys: TRIALS,
        twiceAny: true,
      });
  }, 120_000);
});
