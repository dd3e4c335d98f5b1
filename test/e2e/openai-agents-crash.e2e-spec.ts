/**
 * The OpenAI Agents SDK desk's worker process SIGKILLed in the middle of its agent loop, and another
 * worker process taking the run over:
 * - after the refund's effect at the vendor (the vendor counted it) and before its result committed:
 *   the refund is settled by asking the vendor (lookup by key), every tool effect happened once per
 *   call id, no committed model turn is requested again, the answer is the uninterrupted one;
 * - while the receipts agent's turn (after the handoff) is at the server: only that turn is sent
 *   again; the triage turns, the tools and the handoff come from the record.
 */
import { ChildProcess, fork } from 'node:child_process';
import path from 'node:path';
import { runDurableMigrations } from '../../src/migrations';
import { compiledEntry } from '../helpers/compiled';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';
import { AgentsServer, startAgentsServer } from '../openai-agents/scripted-agents-server';

const FIXTURE = path.join(__dirname, '..', 'openai-agents', 'agents-app.ts');
const ANSWER = 'Refunded 1250 cents for order A-1 (refund rf_1); the order was delivered.';

interface Worker {
  child: ChildProcess;
  /** Modules loaded (a standby waits for `go()` before it starts its worker). */
  loaded: Promise<void>;
  /** The worker is up and claiming. */
  ready: Promise<void>;
  go(): void;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * A worker OS process running the fixture's Nest app (compiled once by test/helpers/compiled.ts; a
 * standby loads while the other worker runs, and starts its worker on `go()`).
 */
function spawnAgentsWorker(env: Record<string, string>, standby = false): Worker {
  const child = fork(compiledEntry(FIXTURE), [], {
    env: { ...process.env, ...env, AWAIT_GO: standby ? '1' : '0' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const said = (what: string) =>
    new Promise<void>((resolve, reject) => {
      child.on('message', (m) => m === what && resolve());
      void exited.then((e) => reject(new Error(`worker exited before ${what}: ${JSON.stringify(e)}`)));
    });
  const loaded = standby ? said('loaded') : Promise.resolve();
  const ready = said('ready');
  loaded.catch(() => undefined);
  ready.catch(() => undefined);
  return { child, loaded, ready, exited, go: () => child.send('go') };
}

describe('openai-agents: a worker killed inside the agent loop', () => {
  let db: TestDatabase;
  let server: AgentsServer;
  let env: Record<string, string>;
  const workers: Worker[] = [];

  beforeEach(async () => {
    db = await createTestDatabase('oacrash');
    await runDurableMigrations({ type: 'postgres', url: db.url });
    server = await startAgentsServer();
    env = { DB_URL: db.url, AI_URL: server.url, LEASE_TTL_MS: '1500', HEARTBEAT_MS: '400' };
  });
  afterEach(async () => {
    for (const w of workers.splice(0)) {
      w.child.kill('SIGKILL');
      await w.exited;
    }
    await server.close();
    await db.drop();
  });

  async function startRun(): Promise<string> {
    const [{ id }] = await db.query<{ id: string }>(
      `insert into ai_runs (kind, input) values ('oa-support', '{"orderId": "A-1"}') returning id`,
    );
    return id;
  }

  /** The victim, up, and a standby heir loading next to it. */
  async function twoWorkers(): Promise<[Worker, Worker]> {
    const victim = spawnAgentsWorker(env);
    const heir = spawnAgentsWorker(env, true);
    workers.push(victim, heir);
    await Promise.all([victim.ready, heir.loaded]);
    return [victim, heir];
  }

  async function heirFinishes(heir: Worker, id: string) {
    heir.go();
    await heir.ready;
    await waitFor(
      async () =>
        (await db.query(`select status from ai_runs where id = $1`, [id]))[0].status === 'succeeded',
      150_000,
      'the run to succeed on the second worker',
    );
    const [run] = await db.query(`select output from ai_runs where id = $1`, [id]);
    return run.output as { finalOutput: string; lastAgent: string; responseIds: string[] };
  }

  it('after the refund reached the vendor: one refund, no committed turn asked again, the same answer', async () => {
    const [victim, heir] = await twoWorkers();
    let refunded!: () => void;
    const applied = new Promise<void>((r) => (refunded = r));
    server.onRefundApplied = () => {
      refunded(); // the effect is applied; its answer never leaves the vendor
      return true;
    };
    const id = await startRun();
    await applied;
    // The parallel read's step commits; then the worker dies with the refund's command in flight.
    await waitFor(
      async () =>
        (
          await db.query(
            `select 1 from ai_checkpoints where run_id = $1 and step_name = 'tool:lookup_order'`,
            [id],
          )
        ).length === 1,
      20_000,
      'the lookup step to commit',
    );
    victim.child.kill('SIGKILL');
    expect((await victim.exited).signal).toBe('SIGKILL');
    expect(server.modelRequests.map((r) => r.turn)).toEqual([1]);
    const [pending] = await db.query(`select status from ai_commands where run_id = $1`, [id]);
    expect(pending.status).toBe('pending'); // the outcome is unknown to the record
    server.onRefundApplied = undefined;

    const output = await heirFinishes(heir, id);
    expect(output.finalOutput).toBe(ANSWER);
    expect(output.lastAgent).toBe('receipts_agent');
    expect(output.responseIds).toEqual(['chatcmpl_1', 'chatcmpl_2', 'chatcmpl_3']);
    // No committed model turn requested again: turn 1 once, then the handoff and the answer.
    expect(server.modelRequests.map((r) => r.turn)).toEqual([1, 2, 3]);
    // Every tool effect once per call id: the read once, the refund applied once and settled by lookup.
    const calls = server.vendorCalls.map((c) => `${c.what}:${c.toolCallId ?? ''}`);
    expect(calls.filter((c) => !c.startsWith('refund-lookup')).sort()).toEqual([
      'lookup_order:call_1_a',
      'refund:call_1_b',
    ]);
    expect(server.vendorCalls.filter((c) => c.what === 'refund-lookup')).toHaveLength(1);
    expect([...server.refunds.values()]).toEqual([
      { refundId: 'rf_1', toolCallId: 'call_1_b', amountCents: 1250 },
    ]);
    const [cmd] = await db.query(`select status, resolution from ai_commands where run_id = $1`, [id]);
    expect(cmd).toEqual({ status: 'succeeded', resolution: 'lookup' });
  }, 240_000);

  it('while the turn after the handoff is at the server: only that turn is sent again', async () => {
    const [victim, heir] = await twoWorkers();
    let asked!: () => void;
    const inFlight = new Promise<void>((r) => (asked = r));
    server.onModelRequest = (turn) => {
      if (turn !== 3) return;
      asked();
      victim.child.kill('SIGKILL'); // the receipts agent's request is at the model; its answer is lost
      return true;
    };
    const id = await startRun();
    await inFlight;
    expect((await victim.exited).signal).toBe('SIGKILL');
    server.onModelRequest = undefined;
    expect(server.modelRequests.map((r) => [r.turn, r.agent])).toEqual([
      [1, 'triage'],
      [2, 'triage'],
      [3, 'receipts'],
    ]);

    const output = await heirFinishes(heir, id);
    expect(output.finalOutput).toBe(ANSWER);
    expect(output.lastAgent).toBe('receipts_agent');
    // The handoff (turn 2's output) replayed from the record: the heir asks the receipts agent at once.
    expect(server.modelRequests.map((r) => [r.turn, r.agent])).toEqual([
      [1, 'triage'],
      [2, 'triage'],
      [3, 'receipts'],
      [3, 'receipts'],
    ]);
    expect(output.responseIds).toEqual(['chatcmpl_1', 'chatcmpl_2', 'chatcmpl_4']);
    expect(server.vendorCalls.map((c) => `${c.what}:${c.toolCallId}`).sort()).toEqual([
      'lookup_order:call_1_a',
      'refund:call_1_b',
    ]);
    expect(server.refunds.size).toBe(1);
  }, 240_000);
});
