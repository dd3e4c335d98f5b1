/**
 * `nestjs-durable-execution/openai-agents`: agents written with the OpenAI Agents SDK
 * (`@openai/agents`) as durable runs. Inside `run(input, ctx)`, `run(agent, input)` / `Runner.run` stay
 * the SDK's own calls; the model provider, the models and the tools given to them are wrapped: every
 * model call a recorded model step, every function tool with side effects an exactly-once command
 * keyed by the model's call id, the other function tools recorded steps. See docs/OPENAI-AGENTS.md.
 * `@openai/agents` is an optional peer dependency: only this entry needs it.
 * @packageDocumentation
 */
export { durableModel, durableModelProvider } from './durable-model';
export type { DurableAgentModelOptions } from './durable-model';
export { durableAgentTools, agentToolCommandContext } from './durable-tools';
export type { AgentToolCommandOptions, DurableAgentToolsOptions } from './durable-tools';
export { durableAgent } from './durable-agent';
export type { DurableAgentOptions } from './durable-agent';
