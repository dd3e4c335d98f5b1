/**
 * LangChain chat models in a LangGraph graph get one retry owner and a record (`durableChatModel`):
 * the agent of test/langgraph/model-graph.ts, its model built as `ChatOpenAI` is (LangChain's 6 retries
 * by default inside each call), on a loopback OpenAI-compatible server.
 * - A persistent 500 is sent the wrapper's `maxAttempts` (3) times in all and the run fails; before the
 *   wrapper it was LangChain's attempts inside each of the run's attempts, and the run dead-lettered.
 * - A 400 is sent once.
 * - Each answer is recorded once in the graph's journal with its token counts, before the node acts on
 *   it: a node run again (after an `interrupt()`, after its worker was SIGKILLed once the model
 *   answered) gets the same answer without a request, so its tool calls (keyed by the answer's ids)
 *   apply once.
 */
import path from 'node:path';
import { INestApplication } from '@nestjs/common';
import { RunRepository } from '../../src';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';
import { spawnWorker, waitFor, WorkerProcess } from '../helpers/processes';
import { ScriptedServer, startScriptedServer } from '../helpers/scripted-openai';
import { LG_MODEL_TABLES, ModelAgentWorkflow, MODEL_RETRY, useModelServer } from '../langgraph/model-graph';
import { closeDatabase, LG_TABLES, useDatabase } from '../langgraph/refund-graph';

const GRAPH_WORKER = path.join(__dirname, '..', 'langgraph', 'graph-worker.ts');

/** The model entries of the run's journal on its thread. */
async function modelEntries(db: TestDatabase, runId: string): Promise<any[]> {
  const rows = await db.query<{ entries: any[] }>(`select entries from langgraph_journal where run_id = $1`, [
    runId,
  ]);
  return rows.flatMap((r) => r.entries).filter((e) => e.kind === 'model');
}

const effects = (db: TestDatabase, runId: string) =>
  db.query(
    `select tool_call_id, count(*)::int as n from lg_model_effects where thread_id = $1 group by 1 order by 1`,
    [`run_${runId}`],
  );

describe('langgraph: a chat model with one retry owner, its answers recorded', () => {
  let db: TestDatabase;
  let server: ScriptedServer;
  let app: INestApplication;
  let runs: RunRepository;

  beforeAll(async () => {
    db = await createTestDatabase('lgmodel');
    server = await startScriptedServer();
    useModelServer(server.baseURL);
    app = await bootApp(db.url, [ModelAgentWorkflow]);
    await db.query(LG_TABLES + ';' + LG_MODEL_TABLES);
    useDatabase(db.url);
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await closeDatabase();
    await server?.close();
    await db?.drop();
  });
  beforeEach(() => server.reset());

  it('a persistent 500 is sent maxAttempts times in all, and the run fails (not dead-lettered)', async () => {
    server.mode = 'fail-500';
    const { run } = await runs.start('lg-model-agent', {});
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('failed');
    expect(done.error).toMatchObject({ message: '500 the model is overloaded' });
    // 3: not LangChain's 7 inside each of the run's 5 attempts. The replay check, which runs the
    // run's code again from its record after each attempt, sent none: the failure is recorded.
    expect(server.modelRequests).toHaveLength(MODEL_RETRY.maxAttempts);
    const [failure, ...more] = (await modelEntries(db, run.id)).reverse();
    expect(failure).toMatchObject({ error: { message: '500 the model is overloaded' } });
    expect(more.map((e) => e.failures)).toEqual([2, 1]); // each failed attempt counted, durably
  });

  it('an error the model refuses to retry (a 400) is sent once', async () => {
    server.mode = 'fail-400';
    const { run } = await runs.start('lg-model-agent', {});
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('failed');
    expect(server.modelRequests).toHaveLength(1);
  });

  it('records the answer once with its usage; the node run again after an interrupt() gets it back', async () => {
    const { run } = await runs.start('lg-model-agent', { approve: true });
    const parked = await driveUntil(app, db, run.id, ['waiting']);
    expect(parked.status).toBe('waiting');
    expect(server.modelRequests).toHaveLength(1);
    const [entry, ...others] = await modelEntries(db, run.id);
    expect(others).toEqual([]);
    expect(entry).toMatchObject({
      name: 'model:scripted-1',
      usage: { inputTokens: 100, outputTokens: 10, totalTokens: 110 },
    });
    expect(entry.answer.data).toContain('call_1_a');
    expect(entry.key).toMatch(/^agent:[0-9a-f-]{36}\|[0-9a-f]{16}#1$/); // the node's task, the prompt, the count

    await runs.signal(run.id, 'resume', { ok: true });
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');
    // The node ran twice (asked, then answered); the model was asked once: the tools act on its ids.
    const [{ n }] = await db.query(`select count(*)::int as n from lg_model_nodes where thread_id = $1`, [
      `run_${run.id}`,
    ]);
    expect(n).toBe(2);
    expect(server.modelRequests).toHaveLength(1);
    expect(await effects(db, run.id)).toEqual([
      { tool_call_id: 'call_1_a', n: 1 },
      { tool_call_id: 'call_1_b', n: 1 },
    ]);
    expect(done.output).toEqual([
      { type: 'human', calls: null, usage: null },
      {
        type: 'ai',
        calls: ['call_1_a', 'call_1_b'],
        usage: { input_tokens: 100, output_tokens: 10, total_tokens: 110 },
      },
      { type: 'tool', calls: null, usage: null },
      { type: 'tool', calls: null, usage: null },
    ]);
    expect(await modelEntries(db, run.id)).toHaveLength(1);
  });
});

describe('langgraph: a worker killed once its model answered', () => {
  let db: TestDatabase;
  let server: ScriptedServer;
  let api: INestApplication;
  const workers: WorkerProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('lgmodelcrash');
    api = await bootApp(db.url); // applies the migrations; starts the run, runs none
    await db.query(LG_TABLES + ';' + LG_MODEL_TABLES);
    server = await startScriptedServer();
  }, 180_000);
  afterAll(async () => {
    for (const w of workers) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.exited));
    await api?.close();
    await server?.close();
    await db?.drop();
  });

  it('the heir runs the node again with the recorded answer: no second request, one effect per tool call', async () => {
    const env = { DB_URL: db.url, LG_MODEL_URL: server.baseURL, LEASE_TTL_MS: '1500', HEARTBEAT_MS: '400' };
    const victim = spawnWorker({ ...env, LG_HANG_AT: 'after-model' }, GRAPH_WORKER);
    workers.push(victim);
    const at = new Promise((resolve) => victim.child.on('message', (m: any) => m?.at && resolve(m.at)));
    await victim.ready;
    const { run } = await api.get(RunRepository).start('lg-model-agent', {});
    expect(await at).toBe('after-model');
    expect(await modelEntries(db, run.id)).toHaveLength(1); // written before the node went on
    victim.child.kill('SIGKILL');
    expect((await victim.exited).signal).toBe('SIGKILL');

    const heir = spawnWorker(env, GRAPH_WORKER);
    workers.push(heir);
    await heir.ready;
    await waitFor(
      async () => (await api.get(RunRepository).get(run.id))!.status === 'succeeded',
      60_000,
      `run ${run.id} to succeed`,
    );
    const nodes = await db.query(`select pid from lg_model_nodes where thread_id = $1 order by id`, [
      `run_${run.id}`,
    ]);
    expect(nodes.map((r: { pid: number }) => r.pid)).toEqual([victim.child.pid, heir.child.pid]);
    expect(server.modelRequests).toHaveLength(1);
    expect(await effects(db, run.id)).toEqual([
      { tool_call_id: 'call_1_a', n: 1 },
      { tool_call_id: 'call_1_b', n: 1 },
    ]);
  }, 240_000);
});
