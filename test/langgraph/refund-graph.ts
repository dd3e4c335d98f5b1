/**
 * A refund agent written with LangGraph.js, as a team would write it, run as a durable workflow with
 * `nestjs-durable-execution/langgraph`: plan (the "model" picks two refund tool calls) → refund (each
 * tool call a `graphCommand` keyed by its tool call id, at a vendor that applies every request it gets)
 * → approve (`interrupt()`: a human answers with the `resume` signal) → summarize. Every node execution
 * and every vendor request is a row in the test database, outside the engine, as real effects are.
 * Used in-process by test/e2e/langgraph-graph.e2e-spec.ts and by the worker process of the crash test.
 * `hooks.at(point)` lets a test stop the worker at a point (`in-refund:<toolCallId>`: the vendor applied
 * that refund, its answer not yet back; `after-refunds`: both refunds recorded, the node not checkpointed).
 */
import { Annotation, END, interrupt, START, StateGraph } from '@langchain/langgraph';
import type { LangGraphRunnableConfig } from '@langchain/langgraph';
import { Pool } from 'pg';
import { DurableWorkflow, RunContext } from '../../src';
import { DurablePostgresSaver, graphCommand, runGraph } from '../../src/langgraph';

export const LG_TABLES = `
  create table if not exists lg_node_runs (id serial primary key, thread_id text not null, node text not null,
                                           pid int not null);
  create table if not exists lg_vendor (id serial primary key, idempotency_key text not null, tool_call_id text not null,
                                        amount_cents int not null)`;

interface ToolCall {
  id: string;
  name: 'refund';
  args: { orderId: string; amountCents: number };
}

const State = Annotation.Root({
  orderId: Annotation<string>(),
  toolCalls: Annotation<ToolCall[]>(),
  refunds: Annotation<Record<string, string>>({ reducer: (a, b) => ({ ...a, ...b }), default: () => ({}) }),
  approvedBy: Annotation<string>(),
  summary: Annotation<string>(),
  log: Annotation<string[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }),
});
type S = typeof State.State;

/** Where a test holds the worker (a no-op by default). */
export const hooks = { at: async (_point: string): Promise<void> => undefined };

let pool: Pool | undefined;
let compiled: ReturnType<typeof build> | undefined;

/** The pool of the agent's effects and of the saver: set once per process. */
export function useDatabase(url: string): Pool {
  // An idle connection the server ends is dropped by the pool (a listener keeps it from failing the test).
  pool ??= new Pool({ connectionString: url, max: 4 }).on('error', (err) =>
    console.warn(`idle connection ended: ${err.message}`),
  );
  return pool;
}

export async function closeDatabase(): Promise<void> {
  await pool?.end();
  pool = undefined;
  compiled = undefined;
}

/** One execution of a node, by thread (the run's) and process. */
const counted = (node: string, config: LangGraphRunnableConfig) =>
  pool!.query(`insert into lg_node_runs (thread_id, node, pid) values ($1, $2, $3)`, [
    config.configurable?.thread_id,
    node,
    process.pid,
  ]);

/** The vendor: applies every request it gets (a duplicate would be a second row); the id says which. */
async function vendorRefund(key: string, call: ToolCall): Promise<{ refundId: string }> {
  const { rows } = await pool!.query<{ n: number }>(
    `with ins as (insert into lg_vendor (idempotency_key, tool_call_id, amount_cents) values ($1, $2, $3) returning 1)
     select (select count(*) from lg_vendor where idempotency_key = $1)::int + 1 as n from ins`,
    [key, call.id, call.args.amountCents],
  );
  return { refundId: `rf_${call.id}_${rows[0].n}` };
}

/** The vendor's lookup by idempotency key. */
async function vendorLookup(key: string) {
  const { rows } = await pool!.query<{ n: number }>(
    `select count(*)::int as n from lg_vendor where idempotency_key = $1`,
    [key],
  );
  const call = key.split(':key_')[1]?.split(':')[0] ?? '';
  return rows[0].n
    ? { found: true as const, result: { refundId: `rf_${call}_1` } }
    : { found: false as const };
}

function build(saver: DurablePostgresSaver) {
  return new StateGraph(State)
    .addNode('plan', async (s: S, config) => {
      await counted('plan', config);
      const calls: ToolCall[] = [
        { id: 'call_a', name: 'refund', args: { orderId: s.orderId, amountCents: 500 } },
        { id: 'call_b', name: 'refund', args: { orderId: s.orderId, amountCents: 750 } },
      ];
      return { toolCalls: calls, log: ['plan'] };
    })
    .addNode('refund', async (s: S, config) => {
      await counted('refund', config);
      const refunds: Record<string, string> = {};
      for (const call of s.toolCalls) {
        const out = await graphCommand(
          { name: 'refund', key: call.id, inDoubt: 'lookup', lookup: vendorLookup },
          call.args,
          async (cmd) => {
            const applied = await vendorRefund(cmd?.idempotencyKey ?? call.id, call);
            await hooks.at(`in-refund:${call.id}`);
            return applied;
          },
        );
        refunds[call.id] = out.refundId;
      }
      await hooks.at('after-refunds');
      return { refunds, log: ['refund'] };
    })
    .addNode('approve', async (s: S, config) => {
      await counted('approve', config);
      const answer = interrupt({ question: 'approve the refunds?', refunds: s.refunds }) as { by: string };
      return { approvedBy: answer.by, log: ['approve'] };
    })
    .addNode('summarize', async (s: S, config) => {
      await counted('summarize', config);
      const ids = Object.keys(s.refunds).sort();
      const summary = `order ${s.orderId}: ${ids.map((id) => s.refunds[id]).join(', ')} approved by ${s.approvedBy}`;
      return { summary, log: ['summarize'] };
    })
    .addEdge(START, 'plan')
    .addEdge('plan', 'refund')
    .addEdge('refund', 'approve')
    .addEdge('approve', 'summarize')
    .addEdge('summarize', END)
    .compile({ checkpointer: saver });
}

/** The compiled graph of this process, on the saver of `useDatabase`'s pool. */
export function refundGraph() {
  compiled ??= build(new DurablePostgresSaver({ db: pool! }));
  return compiled;
}

@DurableWorkflow('lg-refund-agent')
export class RefundAgentWorkflow {
  async run(input: { orderId: string }, ctx: RunContext) {
    const state = await runGraph(ctx, refundGraph(), { orderId: input.orderId });
    return { orderId: state.orderId, refunds: state.refunds, summary: state.summary, log: state.log };
  }
}
