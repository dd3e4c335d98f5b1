import type { BaseMessage } from '@langchain/core/messages';
import type { RunnableConfig } from '@langchain/core/runnables';
import { CommandFailedError } from '../index';
import { graphCommand, GraphCommandOptions } from './graph-calls';

/** A LangChain tool as `durableToolNode` calls it (`tool(...)`, a `StructuredTool`). */
export interface GraphTool {
  name: string;
  invoke(input: any, config?: any): Promise<unknown>;
}

/** Options of `durableToolNode`. */
export interface DurableToolNodeOptions {
  /**
   * The tools with side effects: each call a `graphCommand` named after the tool and keyed by the
   * model's tool call id. Names (in doubt: `'manual'`), or command options per name.
   */
  commands?: string[] | { [name: string]: Omit<GraphCommandOptions, 'name' | 'key'> };
}

/**
 * A tool node for a messages graph, in place of LangGraph's prebuilt `ToolNode`: runs the tool calls of
 * the last AI message one after the other and answers each with a `ToolMessage`. A tool named in
 * `commands` runs as a `graphCommand` keyed by its tool call id (its output recorded; a node run again
 * gets it without calling the tool); its `config.configurable.idempotencyKey` is the command's key, to
 * send to the target. A command that failed definitely is answered as a tool error; any other tool runs
 * as it is, and its error is answered as a tool error, as `ToolNode` does.
 */
export function durableToolNode(tools: GraphTool[], options: DurableToolNodeOptions = {}) {
  const byName = new Map(tools.map((t) => [t.name, t]));
  const commandOf = (name: string): Omit<GraphCommandOptions, 'name' | 'key'> | undefined =>
    Array.isArray(options.commands)
      ? options.commands.includes(name)
        ? {}
        : undefined
      : options.commands?.[name];
  return async (state: { messages: BaseMessage[] }, config?: RunnableConfig) => {
    const { ToolMessage } = await import('@langchain/core/messages');
    const last = state.messages[state.messages.length - 1] as BaseMessage & {
      tool_calls?: Array<{ id?: string; name: string; args: Record<string, unknown> }>;
    };
    const messages: BaseMessage[] = [];
    for (const call of last?.tool_calls ?? []) {
      const answer = (content: unknown, status: 'success' | 'error' = 'success') =>
        messages.push(
          new ToolMessage({
            content: typeof content === 'string' ? content : JSON.stringify(content),
            tool_call_id: call.id ?? '',
            name: call.name,
            status,
          }),
        );
      const tool = byName.get(call.name);
      if (!tool) {
        answer(`Error: tool "${call.name}" is not one of ${[...byName.keys()].join(', ')}`, 'error');
        continue;
      }
      const invoke = (idempotencyKey?: string) =>
        tool.invoke(call.args, {
          ...config,
          configurable: { ...config?.configurable, ...(idempotencyKey ? { idempotencyKey } : {}) },
        });
      const command = commandOf(call.name);
      try {
        answer(
          command && call.id
            ? await graphCommand({ ...command, name: call.name, key: call.id }, call.args, (c) =>
                invoke(c?.idempotencyKey),
              )
            : await invoke(),
        );
      } catch (err) {
        if (command && !(err instanceof CommandFailedError)) throw err; // in doubt, or the engine stopping
        answer(`Error: ${err instanceof CommandFailedError ? err.reason : (err as Error)?.message}`, 'error');
      }
    }
    return { messages };
  };
}
