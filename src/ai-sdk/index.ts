/**
 * `nestjs-durable-execution/ai-sdk`: agents written with the Vercel AI SDK (`ai` 6) as durable runs.
 * Inside `run(input, ctx)`, `generateText` / `streamText` stay the SDK's own calls; the model and the
 * tools given to them are wrapped: every model call a recorded model step, every tool with side effects
 * an exactly-once command keyed by the model's `toolCallId`, the other tools recorded steps. See
 * docs/AI-SDK.md. `ai` is an optional peer dependency: only this entry needs it.
 * @packageDocumentation
 */
export { durableModel } from './durable-model';
export type { AiLanguageModel, DurableModelOptions } from './durable-model';
export { durableTools, toolCommandContext } from './durable-tools';
export type { DurableToolsOptions, ToolCommandOptions } from './durable-tools';
