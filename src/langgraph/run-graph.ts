import type { RunnableConfig } from '@langchain/core/runnables';
import { DurableUsageError } from '../index';
import type { RunContext } from '../index';
import { interruptAnswer, replayJournal } from './graph-calls';
import { GraphFrame, graphStorage } from './graph-frame';
import { DurablePostgresSaver } from './postgres-saver';

/** What `runGraph` uses of a compiled LangGraph graph (`StateGraph.compile({ checkpointer })`). */
export interface DurableGraph<S = Record<string, any>> {
  invoke(input: unknown, config?: any): Promise<unknown>;
  getState(config: any): Promise<{
    values: S;
    next: readonly string[];
    tasks: ReadonlyArray<{
      id: string;
      name: string;
      interrupts: ReadonlyArray<{ id?: string; value?: unknown }>;
    }>;
  }>;
  checkpointer?: unknown;
}

type GraphState = Awaited<ReturnType<DurableGraph<unknown>['getState']>>;

/** The interrupts the graph's tasks are stopped at, in task order. */
function interruptsOf(state: GraphState): Array<{ task: string; id?: string; value?: unknown }> {
  return state.tasks.flatMap((t) => t.interrupts.map((i) => ({ task: t.id, ...i })));
}

/** Options of `runGraph`. */
export interface RunGraphOptions {
  /**
   * The LangGraph thread (default `run_<run id>`): one per graph the run drives. A thread belongs to the
   * run that wrote it first (and its continue-as-new generations): naming another run's thread is
   * refused with `ForeignThreadError` unless `shareThread`. Make it from `ctx.runId`; a thread id taken
   * from a caller's input as it is would let the caller name another's thread.
   */
  threadId?: string;
  /**
   * Share the thread with this run whoever owns it (default false): the run reads it and writes to it.
   * A thread another run wrote (a conversation's earlier turns) is invoked with `input` as a new turn;
   * one this run wrote is resumed. A shared thread is driven by one run at a time: LangGraph's history
   * of a thread is one line.
   */
  shareThread?: boolean;
  /**
   * The signal whose payload answers an `interrupt()` (default `'resume'`): send it with
   * `RunRepository.signal(runId, 'resume', value)`; the node's `interrupt()` returns `value`.
   */
  signal?: string;
  /** More of the invoke's config (recursionLimit, callbacks, configurable values, context). */
  config?: RunnableConfig & Record<string, unknown>;
}

/**
 * Runs a compiled LangGraph graph as (part of) a durable run, from a `@DurableWorkflow`'s `run()`; its
 * final state's values are the result. The graph must be compiled with a `DurablePostgresSaver`: its
 * checkpoints are how the graph resumes. Inside a run:
 * - the thread is the run's (`run_<id>`); the first execution invokes the graph with `input`, and a
 *   later claim (after a crash, a drain, a wait) resumes it from its last checkpoint (LangGraph's
 *   `durability: 'sync'`: each super-step is durable before the next starts); another run's thread is
 *   refused (`ForeignThreadError`) unless `shareThread`, and then invoked with `input` as a new turn;
 * - every checkpoint write is fenced by the claim's epoch (a worker that lost the run writes none);
 * - an `interrupt(value)` parks the run on `ctx.waitForSignal(options.signal)`; the signal's payload
 *   resumes the graph (`new Command({ resume: payload })`);
 * - `graphCommand` calls in nodes are exactly-once commands; the engine calls of the graph are
 *   journaled with its checkpoints, and made again in order when it resumes, so the run's positions are
 *   the same on every claim;
 * - a `durableChatModel`'s answers are journaled too (written before the node gets them): a node run
 *   again gets them from there.
 */
export async function runGraph<S = Record<string, any>>(
  ctx: RunContext,
  graph: DurableGraph<S>,
  input: unknown,
  options: RunGraphOptions = {},
): Promise<S> {
  const saver = graph.checkpointer;
  if (!(saver instanceof DurablePostgresSaver))
    throw new DurableUsageError(
      'runGraph: compile the graph with a DurablePostgresSaver (graph.compile({ checkpointer: saver }))',
    );
  const threadId = options.threadId ?? `run_${ctx.runId}`;
  const config = {
    ...options.config,
    configurable: { ...options.config?.configurable, thread_id: threadId },
    signal: ctx.signal,
    durability: 'sync',
  };
  const frame: GraphFrame = {
    ctx,
    threadId,
    shareThread: options.shareThread === true,
    journal: [],
    known: new Map(),
    recorder: { serde: saver.serde, flush: () => saver.writeJournal(threadId) },
    modelCalls: new Map(),
  };
  return graphStorage.run(frame, async () => {
    // Another run's thread is refused here, before anything of it is read (unless shared).
    const journal = await saver.runJournal(threadId, ctx.runId);
    await replayJournal(frame, journal ?? []);
    const { Command } = await import('@langchain/langgraph');
    // A thread this run's graph wrote (its journal is written with every checkpoint) was started by an
    // earlier claim: it resumes where it is. One stopped at an interrupt is not invoked again before its
    // answer (the node would only ask again). A thread only others wrote (shared) starts a new turn.
    let state = journal && (await saver.getTuple(config)) ? await graph.getState(config) : undefined;
    let next: unknown = state ? null : input;
    for (;;) {
      if (!state || (!interruptsOf(state).length && state.next.length)) {
        frame.modelCalls.clear(); // a node run again by this invoke asks its model calls again, in order
        await graph.invoke(next, config);
        state = await graph.getState(config);
      }
      const asked = interruptsOf(state);
      if (!asked.length) {
        if (state.next.length)
          throw new DurableUsageError(
            `runGraph: the graph stopped before ${state.next.join(', ')} without an interrupt() ` +
              '(interruptBefore / interruptAfter breakpoints are not supported: call interrupt() in the node)',
          );
        return state.values;
      }
      const first = asked[0];
      const answer = await interruptAnswer(frame, options.signal ?? 'resume', first.id ?? first.task);
      next = new Command({ resume: asked.length > 1 && first.id ? { [first.id]: answer } : answer });
      state = undefined;
    }
  });
}
