/**
 * A LangGraph.js graph run by `runGraph` in a worker process SIGKILLed in the middle of its refund node
 * (test/langgraph/refund-graph.ts: plan → refund → approve (interrupt) → summarize). Another worker
 * process takes the run over and resumes the graph from its last checkpoint (after plan): every refund
 * reaches the vendor once per tool call id, plan is not run again, and the final state is the one of an
 * uninterrupted run (run next, on the same worker, with the same input).
 * - after the refunds: both commands recorded, the node's checkpoint not written;
 * - inside the second refund: the vendor applied it, its answer never came back (in doubt → lookup).
 */
import { ChildProcess, fork } from 'node:child_process';
import { INestApplication } from '@nestjs/common';
import { RunRepository } from '../../src';
import { runDurableMigrations } from '../../src/migrations';
import path from 'node:path';
import { bootApp } from '../helpers/app';
import { compiledEntry } from '../helpers/compiled';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';
import { LG_TABLES } from '../langgraph/refund-graph';

const GRAPH_WORKER = path.join(__dirname, '..', 'langgraph', 'graph-worker.ts');

interface Worker {
  child: ChildProcess;
  ready: Promise<void>;
  at: Promise<string>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function spawnWorker(env: Record<string, string>): Worker {
  const child = fork(compiledEntry(GRAPH_WORKER), [], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const message = (pick: (m: any) => unknown) =>
    new Promise<any>((resolve, reject) => {
      child.on('message', (m: any) => pick(m) && resolve(m));
      void exited.then((e) => reject(new Error(`worker exited: ${JSON.stringify(e)}`)));
    });
  const ready = message((m) => m.ready).then(() => undefined);
  const at = message((m) => m.at).then((m) => m.at as string);
  ready.catch(() => undefined);
  at.catch(() => undefined);
  return { child, ready, at, exited };
}

describe('langgraph: a worker killed in the middle of a graph', () => {
  let db: TestDatabase;
  let api: INestApplication;
  const workers: Worker[] = [];

  beforeAll(() => compiledEntry(GRAPH_WORKER), 180_000); // compiled once, before the clocks of the cases start
  beforeEach(async () => {
    db = await createTestDatabase('lgcrash');
    await runDurableMigrations({ type: 'postgres', url: db.url });
    await db.query(LG_TABLES);
    api = await bootApp(db.url); // an API process: starts and signals runs, runs none
  });
  afterEach(async () => {
    for (const w of workers.splice(0)) {
      w.child.kill('SIGKILL');
      await w.exited;
    }
    await api?.close();
    await db?.drop();
  });

  /** Waits for the graph to ask (approve ran, the run parked on the signal), answers, waits for the end. */
  async function finish(runs: RunRepository, id: string): Promise<any> {
    await waitFor(
      async () => {
        const r = (await runs.get(id))!;
        return r.status === 'waiting' && (await nodeRuns(id)).approve >= 1;
      },
      60_000,
      `run ${id} to wait for its approval`,
    );
    await runs.signal(id, 'resume', { by: 'ops' });
    await waitFor(async () => (await runs.get(id))!.status === 'succeeded', 60_000, `run ${id} to succeed`);
    return (await runs.get(id))!.output;
  }

  const nodeRuns = async (id: string) =>
    Object.fromEntries(
      (
        await db.query<{ node: string; n: number }>(
          `select node, count(*)::int as n from lg_node_runs where thread_id = $1 group by node`,
          [`run_${id}`],
        )
      ).map((r) => [r.node, r.n]),
    );
  const vendorCalls = (id: string) =>
    db.query(
      `select tool_call_id, count(*)::int as n from lg_vendor where idempotency_key like $1
        group by tool_call_id order by tool_call_id`,
      [`run_${id}:%`],
    );

  it.each([
    ['after the refunds, before the node checkpointed', 'after-refunds', null],
    ['inside the second refund, after the vendor applied it', 'in-refund:call_b', 'lookup'],
  ])(
    '%s: one refund per tool call id, plan not run again, the uninterrupted final state',
    async (_, point, settled) => {
      const env = { DB_URL: db.url, LEASE_TTL_MS: '1500', HEARTBEAT_MS: '400' };
      const victim = spawnWorker({ ...env, LG_HANG_AT: point as string });
      workers.push(victim);
      await victim.ready; // the only worker: it claims the run
      const runs = api.get(RunRepository);
      const { run } = await runs.start('lg-refund-agent', { orderId: 'A-7' });
      expect(await victim.at).toBe(point);
      victim.child.kill('SIGKILL');
      expect((await victim.exited).signal).toBe('SIGKILL');
      const killedAt = await nodeRuns(run.id);
      expect(killedAt).toEqual({ plan: 1, refund: 1 });

      const heir = spawnWorker(env);
      workers.push(heir);
      await heir.ready;
      const output = await finish(runs, run.id);
      const [{ epoch }] = await db.query(`select epoch::int as epoch from ai_runs where id = $1`, [run.id]);
      expect(epoch).toBeGreaterThanOrEqual(2); // the victim's claim, then the heir's

      // Each refund reached the vendor once; plan ran once; the cut-off refund node ran again, once.
      expect(await vendorCalls(run.id)).toEqual([
        { tool_call_id: 'call_a', n: 1 },
        { tool_call_id: 'call_b', n: 1 },
      ]);
      expect(await nodeRuns(run.id)).toEqual({ plan: 1, refund: 2, approve: 2, summarize: 1 });
      const commands = await db.query(
        `select idempotency_key, status, resolution from ai_commands where run_id = $1 order by step_index`,
        [run.id],
      );
      expect(commands).toEqual([
        { idempotency_key: `run_${run.id}:key_call_a:refund`, status: 'succeeded', resolution: null },
        { idempotency_key: `run_${run.id}:key_call_b:refund`, status: 'succeeded', resolution: settled },
      ]);

      // The same input, uninterrupted, on the heir: the same final state.
      const { run: plain } = await runs.start('lg-refund-agent', { orderId: 'A-7' });
      const expected = await finish(runs, plain.id);
      expect(await nodeRuns(plain.id)).toEqual({ plan: 1, refund: 1, approve: 2, summarize: 1 });
      expect(output).toEqual(expected);
      expect(output).toEqual({
        orderId: 'A-7',
        refunds: { call_a: 'rf_call_a_1', call_b: 'rf_call_b_1' },
        summary: 'order A-7: rf_call_a_1, rf_call_b_1 approved by ops',
        log: ['plan', 'refund', 'approve', 'summarize'],
      });
    },
    240_000,
  );
});
