/**
 * `nestjs-durable-execution/langgraph`: LangGraph.js graphs as durable runs. `DurablePostgresSaver` keeps
 * LangGraph's checkpoints in the module's PostgreSQL, fenced by the run's claim (a thread belongs to the
 * run that wrote it first: another run gets `ForeignThreadError` unless it is shared); `runGraph` runs a
 * compiled graph inside a `@DurableWorkflow`'s `run()` (thread from the run id, resume from the last
 * super-step, `interrupt()` as a signal wait); `graphCommand` makes a node's side effect an idempotent
 * command keyed by its tool call id, as `durableToolNode` does for a messages graph's tool calls;
 * `durableChatModel` records a LangChain chat model's answers in the graph's journal, with one retry
 * policy (the model's own retries off). See
 * docs/LANGGRAPH.md. `@langchain/langgraph` (with
 * `@langchain/langgraph-checkpoint` and `@langchain/core`) are optional peer dependencies: only this entry
 * needs them.
 * @packageDocumentation
 */
export { DurablePostgresSaver } from './postgres-saver';
export type { DurablePostgresSaverOptions } from './saver-options';
export type { SaverFence, SaverQueryable } from './saver-sql';
export { runGraph } from './run-graph';
export type { DurableGraph, RunGraphOptions } from './run-graph';
export { graphCommand } from './graph-calls';
export type { GraphCommandOptions } from './graph-calls';
export { durableToolNode } from './tool-node';
export type { DurableToolNodeOptions, GraphTool } from './tool-node';
export { durableChatModel } from './chat-model';
export type { DurableChatModelOptions } from './chat-model';
// The error the saver throws on another run's thread.
export { ForeignThreadError } from '../errors/foreign-thread.error';
