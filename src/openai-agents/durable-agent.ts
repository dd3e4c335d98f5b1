import type { Agent, Handoff, Model } from '@openai/agents';
import type { RunContext } from '../index';
import { durableModel } from './durable-model';
import type { DurableAgentModelOptions } from './durable-model';
import { commandOptions, wrapTools } from './durable-tools';
import type { DurableAgentToolsOptions } from './durable-tools';

/** Options of `durableAgent`: those of its tools, and of the models of agents that hold a Model object. */
export interface DurableAgentOptions extends DurableAgentToolsOptions {
  /** For an agent whose `model` is a Model object (not a name the runner's provider resolves). */
  model?: DurableAgentModelOptions;
}

type AnyAgent = Agent<any, any>;

/**
 * An agent of the OpenAI Agents SDK and every agent it can hand off to, made durable inside a run:
 * clones (the agents given are left as they are) whose function tools are `durableAgentTools` (the
 * names in `commands` may be tools of any of these agents) and whose Model objects are `durableModel`s.
 * Agents named by a model name (a string) get their models from the runner's provider: make it a
 * `durableModelProvider`. A handoff is model output (a call of `transfer_to_<agent>`): a replayed turn
 * hands the runner the same one, and the runner goes on with the same (durable) agent.
 * @example
 * ```ts
 * const runner = new Runner({ modelProvider: durableModelProvider(ctx, provider), tracingDisabled: true });
 * const result = await runner.run(durableAgent(ctx, triage, { commands: { refund: { inDoubt: 'lookup', lookup } } }), input);
 * ```
 */
export function durableAgent<A extends Agent<any, any>>(
  ctx: RunContext,
  agent: A,
  options: DurableAgentOptions = {},
): A {
  if (!ctx || typeof ctx.uuid !== 'function')
    throw new TypeError("durableAgent takes the run's context first: durableAgent(ctx, agent, options)");
  if (!agent || typeof agent.clone !== 'function')
    throw new TypeError('durableAgent takes an Agent of the OpenAI Agents SDK');
  const commands = commandOptions(options);
  const names = new Set<string>();
  const done = new Map<AnyAgent, AnyAgent>();

  const wrap = (a: AnyAgent): AnyAgent => {
    const seen = done.get(a);
    if (seen) return seen;
    const clone = a.clone({});
    done.set(a, clone); // before the handoffs: agents may hand off to each other
    for (const t of a.tools) if (t.type === 'function') names.add(t.name);
    clone.tools = wrapTools(ctx, a.tools, options, commands);
    clone.handoffs = a.handoffs.map((h) => (isHandoff(h) ? wrapHandoff(h, wrap) : wrap(h)));
    if (a.model && typeof a.model !== 'string')
      clone.model = durableModel(ctx, a.model as Model, options.model);
    return clone;
  };
  const out = wrap(agent) as A;
  for (const name of Object.keys(commands))
    if (!names.has(name))
      throw new TypeError(
        `durableAgent: commands name "${name}", which is not a function tool of its agents`,
      );
  return out;
}

function isHandoff(h: AnyAgent | Handoff<any, any>): h is Handoff<any, any> {
  return typeof (h as Handoff).onInvokeHandoff === 'function' && 'toolName' in h;
}

/** A `handoff(agent, { onHandoff, inputFilter, ... })` whose target is the durable clone. */
function wrapHandoff(h: Handoff<any, any>, wrap: (a: AnyAgent) => AnyAgent): Handoff<any, any> {
  const copy = Object.create(Object.getPrototypeOf(h), Object.getOwnPropertyDescriptors(h)) as Handoff<
    any,
    any
  >;
  copy.agent = wrap(h.agent);
  copy.onInvokeHandoff = async (context, args) => wrap(await h.onInvokeHandoff(context, args));
  return copy;
}
