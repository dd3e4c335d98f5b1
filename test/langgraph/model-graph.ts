/**
 * A LangGraph.js agent whose model is a LangChain chat model (test/langgraph/loopback-chat-model.ts,
 * built as `ChatOpenAI` is) wrapped by `durableChatModel`, on the scripted OpenAI-compatible server of
 * test/helpers/scripted-openai.ts. One node, `agent`: asks the model (its first turn answers two tool
 * calls, `lookup_order` and `refund_policy`, with ids from the server's request counter), optionally
 * asks a human (`interrupt()`, input `approve`), then applies each tool call as a `graphCommand` keyed by
 * its id, an effect row in `lg_model_effects`. A model asked again would answer new ids: new effects.
 * `hooks.at('after-model')` (refund-graph.ts's hooks) lets the crash test stop the worker once the
 * model answered, before any tool acted. Used in-process by test/e2e/langgraph-model.e2e-spec.ts and by
 * the worker process of its crash case (test/langgraph/graph-worker.ts, env LG_MODEL_URL).
 */
import { END, interrupt, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import type { LangGraphRunnableConfig } from '@langchain/langgraph';
import { AIMessage, BaseMessage, HumanMessage, ToolMessage } from '@langchain/core/messages';
import { DurableWorkflow, RunContext } from '../../src';
import { DurablePostgresSaver, durableChatModel, graphCommand, runGraph } from '../../src/langgraph';
import { LoopbackChatOpenAI } from './loopback-chat-model';
import { hooks, useDatabase } from './refund-graph';

export const LG_MODEL_TABLES = `
  create table if not exists lg_model_nodes (id serial primary key, thread_id text not null, pid int not null);
  create table if not exists lg_model_effects (id serial primary key, thread_id text not null,
                                               tool_call_id text not null, tool text not null)`;

/** The model's retries: 3 attempts, quick (the loopback server answers at once). */
export const MODEL_RETRY = { maxAttempts: 3, initialDelayMs: 1, maxDelayMs: 2 };

const model = { url: '' };
/** The scripted server's base URL (`${server.url}/v1`): set once per process. */
export function useModelServer(baseURL: string): void {
  model.url = baseURL;
}

const TOOLS = ['lookup_order', 'refund_policy'].map((name) => ({
  type: 'function' as const,
  function: { name, description: name, parameters: { type: 'object', properties: {} } },
}));

function build(saver: DurablePostgresSaver, approve: boolean) {
  // LangChain's own default: 6 retries inside every call. The wrapper turns them off.
  const chat = durableChatModel(new LoopbackChatOpenAI({ baseURL: model.url }), { retry: MODEL_RETRY });
  const llm = chat.bindTools(TOOLS);
  return new StateGraph(MessagesAnnotation)
    .addNode('agent', async (s, config: LangGraphRunnableConfig) => {
      const pool = useDatabase('');
      const thread = config.configurable?.thread_id as string;
      await pool.query(`insert into lg_model_nodes (thread_id, pid) values ($1, $2)`, [thread, process.pid]);
      const ai = (await llm.invoke(s.messages)) as AIMessage;
      await hooks.at('after-model');
      if (approve) interrupt({ calls: ai.tool_calls?.map((c) => c.id) });
      const results: ToolMessage[] = [];
      for (const call of ai.tool_calls ?? []) {
        const out = await graphCommand({ name: call.name, key: call.id! }, call.args, async () => {
          await pool.query(
            `insert into lg_model_effects (thread_id, tool_call_id, tool) values ($1, $2, $3)`,
            [thread, call.id, call.name],
          );
          return { ok: call.name };
        });
        results.push(
          new ToolMessage({ content: JSON.stringify(out), tool_call_id: call.id!, name: call.name }),
        );
      }
      return { messages: [ai, ...results] };
    })
    .addEdge(START, 'agent')
    .addEdge('agent', END)
    .compile({ checkpointer: saver });
}

@DurableWorkflow('lg-model-agent')
export class ModelAgentWorkflow {
  async run(input: { approve?: boolean }, ctx: RunContext) {
    const graph = build(new DurablePostgresSaver({ db: useDatabase('') }), input.approve === true);
    const state = await runGraph(ctx, graph, { messages: [new HumanMessage('refund order A-1')] });
    return state.messages.map((m: BaseMessage) => ({
      type: m.getType(),
      calls: (m as AIMessage).tool_calls?.map((c) => c.id) ?? null,
      usage: (m as AIMessage).usage_metadata ?? null,
    }));
  }
}
