/**
 * LangGraph.js graphs as durable runs (`nestjs-durable-execution/langgraph`), in one process: the
 * refund agent of test/langgraph/refund-graph.ts end to end (commands keyed by tool call id, the
 * `interrupt()` parked on the `resume` signal, the graph's checkpoints in `langgraph_*`), and the fence
 * of the saver: a write under a claim that no longer holds the run is refused and writes nothing.
 */
import { INestApplication } from '@nestjs/common';
import { Annotation, END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { z } from 'zod';
import { DurableWorkflow, LeaseLostError, RunContext, RunRepository } from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { DurablePostgresSaver, durableToolNode, runGraph } from '../../src/langgraph';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil, gate } from '../helpers/drive';
import { waitFor } from '../helpers/processes';
import {
  closeDatabase,
  LG_TABLES,
  RefundAgentWorkflow,
  refundGraph,
  useDatabase,
} from '../langgraph/refund-graph';

const Two = Annotation.Root({
  steps: Annotation<string[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }),
});
let held = gate();
let entered = gate();
let stopped: unknown;

/** A two-node graph whose first node waits on `held`: the test moves the run's epoch meanwhile. */
@DurableWorkflow('lg-two-steps')
class TwoStepsWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    const graph = new StateGraph(Two)
      .addNode('one', async () => {
        entered.open();
        await held.promise;
        return { steps: ['one'] };
      })
      .addNode('two', () => ({ steps: ['two'] }))
      .addEdge(START, 'one')
      .addEdge('one', 'two')
      .addEdge('two', END)
      .compile({ checkpointer: refundGraph().checkpointer as DurablePostgresSaver });
    try {
      return await runGraph(ctx, graph, {});
    } catch (err) {
      stopped = err;
      throw err;
    }
  }
}

const sentKeys: unknown[] = [];

/** A messages graph whose tool node is `durableToolNode`: the refund tool a command, the lookup not. */
@DurableWorkflow('lg-tools')
class ToolsWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    const refund = tool(
      async (args: { amountCents: number }, config) => {
        sentKeys.push(config?.configurable?.idempotencyKey);
        return { refundId: `rf_${args.amountCents}` };
      },
      { name: 'refund', description: 'Refunds', schema: z.object({ amountCents: z.number() }) },
    );
    const lookup = tool(async () => 'order A-1: shipped', {
      name: 'lookup_order',
      description: 'Looks up the order',
      schema: z.object({}),
    });
    const calls = [
      { id: 'call_t1', name: 'lookup_order', args: {} },
      { id: 'call_t2', name: 'refund', args: { amountCents: 300 } },
      { id: 'call_t3', name: 'no_such_tool', args: {} },
    ];
    const graph = new StateGraph(MessagesAnnotation)
      .addNode('agent', () => ({ messages: [new AIMessage({ content: '', tool_calls: calls })] }))
      .addNode('tools', durableToolNode([refund, lookup], { commands: ['refund'] }))
      .addEdge(START, 'agent')
      .addEdge('agent', 'tools')
      .addEdge('tools', END)
      .compile({ checkpointer: refundGraph().checkpointer as DurablePostgresSaver });
    const state = await runGraph(ctx, graph, { messages: [new HumanMessage('refund A-1')] });
    return state.messages.map((m: any) => ({
      type: m.getType(),
      content: m.content,
      call: m.tool_call_id ?? null,
    }));
  }
}

describe('langgraph: a compiled graph as a durable run', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;

  beforeAll(async () => {
    db = await createTestDatabase('lggraph');
    app = await bootApp(db.url, [RefundAgentWorkflow, TwoStepsWorkflow, ToolsWorkflow], {
      database: { url: db.url },
    });
    await db.query(LG_TABLES);
    useDatabase(db.url);
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await closeDatabase();
    await db?.drop();
  });

  it('runs the graph: commands keyed by tool call id, interrupt() parked on a signal, resumed by it', async () => {
    const {
      run: { id },
    } = await runs.start('lg-refund-agent', { orderId: 'A-1' });
    expect((await driveUntil(app, db, id, ['waiting'])).status).toBe('waiting');
    const commands = await db.query(
      `select idempotency_key, status from ai_commands where run_id = $1 order by step_index`,
      [id],
    );
    expect(commands).toEqual([
      { idempotency_key: `run_${id}:key_call_a:refund`, status: 'succeeded' },
      { idempotency_key: `run_${id}:key_call_b:refund`, status: 'succeeded' },
    ]);
    const [journal] = await db.query(`select entries, epoch from langgraph_journal where thread_id = $1`, [
      `run_${id}`,
    ]);
    expect(journal.entries.map((e: { kind: string; key: string }) => `${e.kind}:${e.key}`)).toEqual([
      'command:call_a',
      'command:call_b',
    ]);

    await runs.signal(id, 'resume', { by: 'ops' });
    const done = await driveUntil(app, db, id);
    expect(done.status).toBe('succeeded');
    expect(done.output).toEqual({
      orderId: 'A-1',
      refunds: { call_a: 'rf_call_a_1', call_b: 'rf_call_b_1' },
      summary: 'order A-1: rf_call_a_1, rf_call_b_1 approved by ops',
      log: ['plan', 'refund', 'approve', 'summarize'],
    });
    // The second claim replayed the two commands, then the wait, at their positions: nothing was sent again.
    expect(await db.query(`select tool_call_id from lg_vendor order by id`)).toEqual([
      { tool_call_id: 'call_a' },
      { tool_call_id: 'call_b' },
    ]);
    const nodes = await db.query<{ node: string; n: number }>(
      `select node, count(*)::int as n from lg_node_runs where thread_id = $1 group by node order by node`,
      [`run_${id}`],
    );
    // approve runs twice: once to ask (interrupt), once with the answer (LangGraph re-runs the node).
    expect(nodes).toEqual([
      { node: 'approve', n: 2 },
      { node: 'plan', n: 1 },
      { node: 'refund', n: 1 },
      { node: 'summarize', n: 1 },
    ]);
    const [cps] = await db.query(
      `select count(*)::int as n, count(distinct epoch)::int as epochs from langgraph_checkpoints where thread_id = $1`,
      [`run_${id}`],
    );
    expect(cps).toEqual({ n: expect.any(Number), epochs: 2 });
    expect(cps.n).toBeGreaterThanOrEqual(5);
  });

  it('durableToolNode: a command tool keyed by its tool call id, the other tools as they are', async () => {
    const {
      run: { id },
    } = await runs.start('lg-tools', {});
    const done = await driveUntil(app, db, id);
    expect(done.status).toBe('succeeded');
    expect(done.output).toEqual([
      { type: 'human', content: 'refund A-1', call: null },
      { type: 'ai', content: '', call: null },
      { type: 'tool', content: 'order A-1: shipped', call: 'call_t1' },
      { type: 'tool', content: '{"refundId":"rf_300"}', call: 'call_t2' },
      { type: 'tool', content: expect.stringMatching(/^Error: tool "no_such_tool"/), call: 'call_t3' },
    ]);
    const key = `run_${id}:key_call_t2:refund`;
    expect(sentKeys).toEqual([key]);
    expect(
      await db.query(`select idempotency_key, status, result from ai_commands where run_id = $1`, [id]),
    ).toEqual([{ idempotency_key: key, status: 'succeeded', result: { refundId: 'rf_300' } }]);
  });

  it("refuses a stale epoch's write: LeaseLostError, nothing written (and the current epoch's is written)", async () => {
    held = gate();
    entered = gate();
    const {
      run: { id },
    } = await runs.start('lg-two-steps', {});
    await app.get(DurableWorker).tick();
    await entered.promise; // node "one" is running: the run is running, under epoch 1
    const [{ epoch }] = await db.query(`select epoch::int as epoch from ai_runs where id = $1`, [id]);
    const saverOf = (e: number) =>
      new DurablePostgresSaver({ db: useDatabase(db.url), fence: () => ({ runId: id, epoch: e }) });
    const tuple = (await saverOf(epoch).getTuple({ configurable: { thread_id: `run_${id}` } }))!;
    const cfg = { configurable: { thread_id: `probe_${id}`, checkpoint_ns: '' } };
    const cp = { ...tuple.checkpoint, id: '1f000000-0000-6000-8000-000000000001' };
    await expect(
      saverOf(epoch - 1).put(cfg, cp, { source: 'loop', step: 9, parents: {} }, {}),
    ).rejects.toThrow(LeaseLostError);
    await expect(
      saverOf(epoch - 1).putWrites(
        { configurable: { ...cfg.configurable, checkpoint_id: cp.id } },
        [['x', 1]],
        't',
      ),
    ).rejects.toThrow(LeaseLostError);
    expect(
      await db.query(`select 1 from langgraph_checkpoints where thread_id = $1`, [`probe_${id}`]),
    ).toEqual([]);
    expect(await db.query(`select 1 from langgraph_writes where thread_id = $1`, [`probe_${id}`])).toEqual(
      [],
    );
    await saverOf(epoch).put(cfg, cp, { source: 'loop', step: 9, parents: {} }, {});
    expect(
      await db.query(`select epoch from langgraph_checkpoints where thread_id = $1`, [`probe_${id}`]),
    ).toEqual([{ epoch }]);

    // The run's own graph, as a zombie: another claim takes the run (its epoch moves on) while node
    // "one" runs; when it returns, the graph's checkpoint write is refused in its statement.
    const rowsOf = async () => ({
      checkpoints: await db.query(
        `select checkpoint_id, epoch from langgraph_checkpoints where thread_id = $1`,
        [`run_${id}`],
      ),
      writes: await db.query(`select task_id, channel, epoch from langgraph_writes where thread_id = $1`, [
        `run_${id}`,
      ]),
    });
    const before = await rowsOf();
    expect(before.checkpoints.length).toBeGreaterThan(0);
    await db.query(`update ai_runs set epoch = epoch + 1 where id = $1`, [id]);
    held.open();
    await waitFor(async () => stopped !== undefined, 10_000, 'the graph to stop');
    expect(stopped).toBeInstanceOf(LeaseLostError);
    // Refused by the saver's own statement (not noticed by a heartbeat first).
    expect(stopped).toMatchObject({
      runId: id,
      epoch,
      during: expect.stringMatching(/^a LangGraph (pending|checkpoint) write$/),
    });
    // Node "one"'s result (a pending write) and the next checkpoint were refused: the rows are as before.
    expect(await rowsOf()).toEqual(before);
    await app.get(DurableWorker).idle();
  });
});
