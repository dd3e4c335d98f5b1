import { DurableExecutionError } from './durable-execution.error';

/**
 * A durable run read or wrote a LangGraph thread (`nestjs-durable-execution/langgraph`) that another run
 * owns: a thread belongs to the run that wrote it first (and to that run's continue-as-new generations,
 * which keep its id). Nothing was read or written. Use a thread of the run's own (`runGraph`'s default,
 * `run_<run id>`), never a thread id taken from a caller's input as it is, or share the thread explicitly
 * (`runGraph(ctx, graph, input, { threadId, shareThread: true })`, `DurablePostgresSaver`'s
 * `shareThreads`). With `DurableExceptionFilter`, a 403.
 */
export class ForeignThreadError extends DurableExecutionError {
  declare readonly code: 'DURABLE_FOREIGN_THREAD';
  constructor(
    /** The thread the run named. */
    public readonly threadId: string,
    /** The run that named it (not its owner). */
    public readonly runId: string,
    /** What the run tried: a read (`getTuple`, `list`, `runGraph`'s resume) or a write. */
    public readonly access: 'read' | 'write',
  ) {
    super(
      'DURABLE_FOREIGN_THREAD',
      `Run ${runId} may not ${access} LangGraph thread ${JSON.stringify(threadId.slice(0, 200))}: another run ` +
        'wrote it first, and a thread belongs to the run that first wrote it (and its continue-as-new ' +
        `generations). Nothing was ${access === 'read' ? 'read' : 'written'}. Use a thread of this run's own ` +
        "(runGraph's default run_<run id>, or an id made from ctx.runId; never a thread id taken from a " +
        "caller's input as it is), or share the thread explicitly: runGraph(ctx, graph, input, { threadId, " +
        "shareThread: true }) or DurablePostgresSaver's shareThreads option.",
    );
  }
}
