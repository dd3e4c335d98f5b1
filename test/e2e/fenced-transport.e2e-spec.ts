import path from 'node:path';
import http from 'node:http';
import { AddressInfo, connect, Socket } from 'node:net';
import { runDurableMigrations } from '../../src/migrations';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { FakeTarget, startFakeTarget } from '../helpers/fake-target';
import { spawnWorker, waitFor, WorkerProcess } from '../helpers/processes';
import { startTcpSwitch, TcpSwitch } from '../helpers/tcp-switch';

/**
 * Effects leave only under a live lease (issue 34): a worker frozen (SIGSTOP) or cut off from
 * PostgreSQL inside a command body, after the engine's last lease check and before its request's
 * bytes leave, while another worker takes the run over, looks the command up at a target that does
 * not deduplicate keys (not found) and sends it. With the fenced transport on, the zombie's request is
 * refused at the socket: one effect per key. Each case runs again with the transport off and must
 * then charge keys twice (the test's power). Trials: TRIALS runs per case, frozen together.
 */
const FIXTURE = path.join(__dirname, '..', 'fixtures', 'zombie-sender-app.ts');
const TRIALS = 20;
const POWER_TRIALS = 5;

type Client = 'fetch' | 'http' | 'axios';
interface Case {
  client: Client;
  shape: 'pre-send' | 'in-client' | 'reset';
  /** How the zombie is made: frozen by SIGSTOP, or cut off from PostgreSQL only (a TCP switch held). */
  fault: 'sigstop' | 'db-cut';
  signal?: boolean;
  proxy?: boolean;
}

describe('fenced transport: a zombie command body sends nothing after a takeover', () => {
  let db: TestDatabase;
  let target: FakeTarget;
  const workers: WorkerProcess[] = [];
  let proxy: http.Server | undefined;
  let dbSwitch: TcpSwitch | undefined;

  beforeEach(async () => {
    db = await createTestDatabase('fenced_transport');
    await runDurableMigrations({ type: 'postgres', url: db.url });
    target = await startFakeTarget({ honoursKeys: false });
  });
  afterEach(async () => {
    for (const w of workers.splice(0)) {
      w.child.kill('SIGCONT');
      w.child.kill('SIGKILL');
      await w.exited;
    }
    await dbSwitch?.close();
    dbSwitch = undefined;
    if (proxy) {
      proxy.closeAllConnections();
      await new Promise((r) => proxy!.close(r));
      proxy = undefined;
    }
    await target.close();
    await db.drop();
  });

  /** A tunnelling HTTP proxy (undici's ProxyAgent sends CONNECT, then the request inside the tunnel). */
  async function startProxy(): Promise<string> {
    proxy = http.createServer((_req, res) => res.writeHead(405).end());
    proxy.on('connect', (req: http.IncomingMessage, client: Socket, head: Buffer) => {
      const [host, port] = req.url!.split(':');
      const up = connect(Number(port), host, () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        up.write(head);
        up.pipe(client);
        client.pipe(up);
      });
      up.on('error', () => client.destroy());
      client.on('error', () => up.destroy());
    });
    await new Promise<void>((r) => proxy!.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  }

  /** Runs `n` zombie trials of one case; returns how many keys the target charged more than once. */
  async function trial(c: Case, fenced: boolean, n: number): Promise<{ twice: number; keys: number }> {
    if (c.shape === 'reset') {
      // The target holds each key's first charge (no effect) until the test resets its socket.
      await target.close();
      target = await startFakeTarget({ honoursKeys: false, holdFirst: true });
    }
    const env: Record<string, string> = {
      DB_URL: db.url,
      TARGET_URL: target.url,
      FENCED: fenced ? '1' : '0',
      LEASE_TTL_MS: '1500',
      HEARTBEAT_MS: '400',
      ...(c.proxy ? { PROXY_URL: await startProxy() } : {}),
    };
    if (c.fault === 'db-cut') {
      // Worker A reaches PostgreSQL through a switch the test holds; its body waits long enough for
      // the lease to lapse and worker B to take over and send, then sends itself (not frozen).
      dbSwitch = await startTcpSwitch(Number(new URL(db.url).port || 5432));
      const viaSwitch = new URL(db.url);
      viaSwitch.hostname = '127.0.0.1';
      viaSwitch.port = String(dbSwitch.port);
      env.DB_URL = viaSwitch.toString();
      env.PRE_SEND_MS = '6000';
    }
    const a = spawnWorker(env, FIXTURE);
    workers.push(a);
    await a.ready;
    let inBody = 0; // bodies that announced their wait (pre-send) or their socket's slow connect (dns)
    a.child.on('message', (m: { at?: string }) => {
      if (m.at) inBody++;
    });
    const input = { client: c.client, shape: c.shape, ...(c.signal ? { signal: true } : {}) };
    await db.query(
      `insert into ai_runs (kind, input) select 'zsend', $1::jsonb from generate_series(1, $2)`,
      [JSON.stringify(input), n],
    );
    // Every body is past the engine's lease check, before its request left (or, shape reset, its
    // first request is held at the target, unanswered and without effect).
    if (c.shape === 'reset')
      await waitFor(async () => target.held() >= n, 20_000, `${n} first charges of worker A to arrive`);
    else await waitFor(async () => inBody >= n, 20_000, `${n} command bodies of worker A to start`);
    if (c.fault === 'sigstop') a.child.kill('SIGSTOP');
    else dbSwitch!.pause();
    // The held sockets are reset while A is frozen: its re-sends run first thing on wake.
    if (c.shape === 'reset') target.resetHeld();
    const b = spawnWorker({ ...env, DB_URL: db.url, PRE_SEND_MS: '300' }, FIXTURE);
    workers.push(b);
    await b.ready;
    await waitFor(
      async () =>
        (await db.query(`select count(*)::int as n from ai_runs where status = 'succeeded'`))[0].n === n,
      60_000,
      `worker B to take the ${n} runs over and finish them`,
    );
    if (c.fault === 'sigstop') a.child.kill('SIGCONT');
    // Worker A's bodies go on: each sends now, or is refused at the socket.
    await new Promise((r) => setTimeout(r, c.fault === 'sigstop' ? 2500 : 6000));
    const effects = target.effects();
    const keys = Object.keys(effects).length;
    const twice = Object.values(effects).filter((e) => e > 1).length;
    const taken = await db.query(
      `select count(*)::int as n from ai_events where event_type = 'run.claimed' and epoch = 2`,
    );
    expect(taken[0].n).toBe(n); // every run was taken over (the premise)
    console.log(
      `${JSON.stringify(c)} transport ${fenced ? 'on' : 'off'}: ${keys} keys, ${twice} charged twice`,
    );
    return { twice, keys };
  }

  const cases: Case[] = [
    { client: 'fetch', shape: 'pre-send', fault: 'sigstop' },
    { client: 'http', shape: 'pre-send', fault: 'sigstop' },
    { client: 'axios', shape: 'pre-send', fault: 'sigstop' },
    { client: 'fetch', shape: 'in-client', fault: 'sigstop' },
    { client: 'http', shape: 'in-client', fault: 'sigstop' },
    { client: 'axios', shape: 'in-client', fault: 'sigstop' },
    { client: 'fetch', shape: 'reset', fault: 'sigstop' },
    { client: 'http', shape: 'reset', fault: 'sigstop' },
    { client: 'axios', shape: 'reset', fault: 'sigstop' },
    { client: 'fetch', shape: 'pre-send', fault: 'sigstop', proxy: true },
    { client: 'fetch', shape: 'pre-send', fault: 'db-cut' },
    { client: 'http', shape: 'pre-send', fault: 'db-cut' },
    { client: 'axios', shape: 'pre-send', fault: 'db-cut' },
  ];
  const shapes = {
    'pre-send': 'an await in the body before the request',
    'in-client': 'a slow connect inside the client',
    reset: 'its socket reset mid-request and the request re-sent',
  };
  const name = (c: Case) =>
    `${c.client}${c.proxy ? ' through an app-installed ProxyAgent' : ''}, ${shapes[c.shape]}, ${c.fault === 'sigstop' ? 'worker frozen' : 'worker cut off from PostgreSQL only'}`;

  for (const c of cases) {
    it(`${name(c)}: ${TRIALS} keys, each charged once`, async () => {
      const { twice, keys } = await trial(c, true, TRIALS);
      expect({ keys, twice }).toEqual({ keys: TRIALS, twice: 0 });
    }, 120_000);

    it(`${name(c)}: with the transport off, keys are charged twice (the test's power)`, async () => {
      const { twice } = await trial(c, false, POWER_TRIALS);
      expect(twice).toBeGreaterThan(0);
    }, 120_000);
  }

  it("a worker cut off from PostgreSQL aborts ctx.signal at its lease's deadline by itself (transport off)", async () => {
    // No heartbeat answer ever comes (the switch holds the connection): only the deadline's own timer
    // can abort the signal the body passed to its wait and its request.
    const { twice, keys } = await trial(
      { client: 'fetch', shape: 'pre-send', fault: 'db-cut', signal: true },
      false,
      POWER_TRIALS,
    );
    expect({ keys, twice }).toEqual({ keys: POWER_TRIALS, twice: 0 });
  }, 120_000);
});
