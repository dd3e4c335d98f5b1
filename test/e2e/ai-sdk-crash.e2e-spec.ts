/**
 * The AI SDK agent's worker process SIGKILLed in the middle of its tool loop: after the refund's effect
 * at the vendor and before the vendor's answer reached it. Another worker process takes the run over:
 * the refund is settled by asking the vendor (lookup by key), every tool effect happened once per
 * toolCallId, no committed model turn is requested again, and the answer is the uninterrupted one.
 */
import { ChildProcess, fork } from 'node:child_process';
import path from 'node:path';
import { runDurableMigrations } from '../../src/migrations';
import { compiledEntry } from '../helpers/compiled';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';
import { ScriptedServer, startScriptedServer } from '../helpers/scripted-openai';

const FIXTURE = path.join(__dirname, '..', 'fixtures', 'ai-agent-app.ts');

interface Worker {
  child: ChildProcess;
  ready: Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function spawnAgentWorker(env: Record<string, string>): Worker {
  const child = fork(compiledEntry(FIXTURE), [], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const ready = new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    void exited.then((e) => reject(new Error(`worker exited before ready: ${JSON.stringify(e)}`)));
  });
  ready.catch(() => undefined);
  return { child, ready, exited };
}

describe('ai-sdk: a worker killed inside the tool loop', () => {
  let db: TestDatabase;
  let server: ScriptedServer;
  const workers: Worker[] = [];

  beforeEach(async () => {
    db = await createTestDatabase('aisdkcrash');
    await runDurableMigrations({ type: 'postgres', url: db.url });
    server = await startScriptedServer();
  });
  afterEach(async () => {
    for (const w of workers.splice(0)) {
      w.child.kill('SIGKILL');
      await w.exited;
    }
    await server.close();
    await db.drop();
  });

  it('after the refund reached the vendor: one refund, no committed turn asked again, the same answer', async () => {
    const env = { DB_URL: db.url, AI_URL: server.url, LEASE_TTL_MS: '1500', HEARTBEAT_MS: '400' };
    const victim = spawnAgentWorker(env);
    workers.push(victim);
    server.onRefundApplied = () => {
      victim.child.kill('SIGKILL'); // the effect is applied; its answer never leaves the vendor
      return true;
    };
    await victim.ready;
    const [{ id }] = await db.query<{ id: string }>(
      `insert into ai_runs (kind, input) values ('ai-support', '{"orderId": "A-1"}') returning id`,
    );
    expect((await victim.exited).signal).toBe('SIGKILL');
    expect(server.modelRequests.map((r) => r.turn)).toEqual([1, 2]);
    expect(server.refunds.size).toBe(1);
    server.onRefundApplied = undefined;

    const heir = spawnAgentWorker(env);
    workers.push(heir);
    await waitFor(
      async () =>
        (await db.query(`select status from ai_runs where id = $1`, [id]))[0].status === 'succeeded',
      45_000,
      'the run to succeed on the second worker',
    );
    const [run] = await db.query(`select output from ai_runs where id = $1`, [id]);

    // The same answer as an uninterrupted run (ai-sdk-loop.e2e-spec.ts): one refund, rf_1.
    expect(run.output.text).toBe('Refunded 1250 cents for order A-1 (refund rf_1).');
    expect(run.output.toolCalls).toEqual([
      { id: 'call_1_a', name: 'lookup_order' },
      { id: 'call_1_b', name: 'refund_policy' },
      { id: 'call_2_c', name: 'refund' },
    ]);
    // No committed model turn requested again: turns 1 and 2 once each, then the answer.
    expect(server.modelRequests.map((r) => r.turn)).toEqual([1, 2, 3]);
    // Every tool effect once per toolCallId: the reads once, the refund applied once and settled by lookup.
    const calls = server.vendorCalls.map((c) => `${c.what}:${c.toolCallId ?? ''}`);
    expect(calls.filter((c) => c.startsWith('lookup_order'))).toEqual(['lookup_order:call_1_a']);
    expect(calls.filter((c) => c.startsWith('refund_policy'))).toEqual(['refund_policy:call_1_b']);
    expect(calls.filter((c) => c.startsWith('refund:'))).toEqual(['refund:call_2_c']);
    expect(server.vendorCalls.filter((c) => c.what === 'refund-lookup')).toHaveLength(1);
    expect([...server.refunds.values()]).toEqual([
      { refundId: 'rf_1', toolCallId: 'call_2_c', amountCents: 1250 },
    ]);
    const [cmd] = await db.query(`select status, resolution from ai_commands where run_id = $1`, [id]);
    expect(cmd).toEqual({ status: 'succeeded', resolution: 'lookup' });
  }, 90_000);
});
