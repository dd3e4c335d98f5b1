import { CommandFailedError, IdempotentCommand } from '../index';
import type {
  CommandContext,
  IdempotentCommandOptions,
  InDoubtPolicy,
  LookupContext,
  LookupResult,
  RetryPolicy,
} from '../index';
import { CallOutcome, currentGraph, GraphFrame, JournalEntry, ownKey } from './graph-frame';

/** Options of `graphCommand`: the `@IdempotentCommand` a node's side effect runs as. */
export interface GraphCommandOptions {
  /** The command's name (part of its idempotency key and its events): e.g. the tool's name. */
  name: string;
  /**
   * The call's identity, the same every time the node runs for this call: the model's tool call id
   * (`toolCall.id`). The command's key is `run_<id>:key_<key>:<name>` (a key outside `[A-Za-z0-9_.-]`,
   * or longer than 200, is rewritten with a hash). Unique per run and name.
   */
  key: string;
  /** What settles a call whose outcome a crash hid (default `'manual'`: the run parks for an operator). */
  inDoubt?: InDoubtPolicy;
  /** For `inDoubt: 'lookup'`: did the target apply the call with this idempotency key, with which result? */
  lookup?: (idempotencyKey: string, context?: LookupContext) => Promise<LookupResult>;
  /** In-claim retries of a call that threw (same key every time). Default: 1 attempt. */
  retry?: RetryPolicy;
  /** Whether an error the call threw says the target refused it (did nothing): recorded as failed. */
  definiteError?: (error: unknown) => boolean;
}

/**
 * A side effect of a graph node as an exactly-once command of the durable run: reserved before `body`
 * runs, `body` given the command's context (`idempotencyKey` to send to the target, `fence`, `signal`),
 * its result recorded. The node may run again (its super-step was cut off by a crash, or resumed after
 * an `interrupt()`): the call then returns the recorded result (or rethrows the recorded
 * `CommandFailedError`) without calling `body`; a call whose outcome a crash hid is settled by
 * `inDoubt`. Inside `runGraph` only; elsewhere `body()` runs as it is (no run, no key).
 */
export async function graphCommand<T>(
  options: GraphCommandOptions,
  args: unknown,
  body: (command: CommandContext | undefined) => T | Promise<T>,
): Promise<Awaited<T>> {
  const frame = currentGraph();
  if (!frame) return (await body(undefined)) as Awaited<T>;
  const key = ownKey(options.key);
  const known = frame.known.get(commandRef(options.name, key));
  if (known) return settled(known) as Awaited<T>;
  const call = commandCaller(
    {
      name: options.name,
      inDoubt: options.inDoubt ?? 'manual',
      key: () => key,
      retry: options.retry,
      definiteError: options.definiteError,
    },
    options.lookup,
  );
  const entry: JournalEntry = {
    kind: 'command',
    name: options.name,
    key,
    args: JSON.stringify(args ?? null),
  };
  const outcome = await journaled(frame, entry, commandRef(options.name, key), () =>
    call(JSON.parse(entry.args), (c) => body(c)),
  );
  return settled(outcome) as Awaited<T>;
}

/** The answer to an interrupt: the payload of signal `signal` (`key`: the interrupt), journaled. */
export async function interruptAnswer(frame: GraphFrame, signal: string, key: string): Promise<unknown> {
  const ref = waitRef(key);
  const known = frame.known.get(ref);
  if (known) {
    frame.known.delete(ref); // an interrupt is answered once; a node asking again asks anew
    return settled(known);
  }
  const outcome = await journaled(frame, { kind: 'wait', signal, key }, ref, () =>
    frame.ctx.waitForSignal(signal),
  );
  return settled(outcome);
}

/**
 * Makes the journal's calls again, in order, at the positions they took: the engine answers each from
 * its record. Their outcomes are kept by key, for the nodes that make them again, as are the recorded
 * model answers.
 */
export async function replayJournal(frame: GraphFrame, entries: JournalEntry[]): Promise<void> {
  for (const entry of entries) {
    if (entry.kind === 'model') {
      // A model answer takes no position: it is only known again (and kept in the journal).
      frame.journal.push({ entry, done: true });
      frame.known.set(modelRef(entry.key), { ok: true, value: entry });
    } else if (entry.kind === 'command') {
      const call = commandCaller({ name: entry.name, inDoubt: 'manual', key: () => entry.key });
      await journaled(frame, entry, commandRef(entry.name, entry.key), () =>
        call(JSON.parse(entry.args), () => {
          throw new Error(`command ${entry.name} (${entry.key}) of the graph's journal is not recorded`);
        }),
      );
    } else await journaled(frame, entry, waitRef(entry.key), () => frame.ctx.waitForSignal(entry.signal));
  }
}

const commandRef = (name: string, key: string) => `command:${name}:${key}`;
const waitRef = (key: string) => `wait:${key}`;
/** Where a model call's answer (its `ModelEntry`) is known by its key. */
export const modelRef = (key: string) => `model:${key}`;

/**
 * One engine call of the graph: its journal entry takes its place when the call is made (the order of
 * the run's positions, concurrent calls included) and counts as answered once the engine answered; an
 * engine stop (nothing recorded) leaves it unanswered, and the saver writes no entry from there on.
 */
async function journaled(
  frame: GraphFrame,
  entry: JournalEntry,
  ref: string,
  call: () => Promise<unknown>,
): Promise<CallOutcome> {
  const slot = { entry, done: false };
  frame.journal.push(slot);
  const outcome = await recorded(call);
  slot.done = true;
  frame.known.set(ref, outcome);
  return outcome;
}

/**
 * The outcome the engine recorded: a value, or a recorded failure (`CommandFailedError`, a signal's
 * timeout). Any other error (the run lost its lease, was cancelled, parks) is the engine stopping the
 * run: nothing was recorded, so it is thrown and the call stays out of the journal.
 */
async function recorded(call: () => Promise<unknown>): Promise<CallOutcome> {
  try {
    return { ok: true, value: await call() };
  } catch (error) {
    if (error instanceof CommandFailedError) return { ok: false, error };
    throw error;
  }
}

function settled(outcome: CallOutcome): unknown {
  if (outcome.ok) return outcome.value;
  throw outcome.error;
}

/** An `@IdempotentCommand` with these options, made at run time (as the ai-sdk entry does). */
function commandCaller(
  options: IdempotentCommandOptions,
  lookup?: (idempotencyKey: string, context?: LookupContext) => Promise<LookupResult>,
): (args: unknown, body: (ctx: CommandContext | undefined) => unknown) => Promise<unknown> {
  class GraphCommand {
    constructor(private readonly body: (ctx: CommandContext | undefined) => unknown) {}
    call(_args: unknown, ctx?: CommandContext): unknown {
      return this.body(ctx);
    }
  }
  if (lookup)
    Object.defineProperty(GraphCommand.prototype, 'lookupCommand', {
      value: (_command: string, key: string, context?: LookupContext) => lookup(key, context),
    });
  const descriptor = Object.getOwnPropertyDescriptor(GraphCommand.prototype, 'call')!;
  const out = IdempotentCommand(options)(GraphCommand.prototype, 'call', descriptor) ?? descriptor;
  Object.defineProperty(GraphCommand.prototype, 'call', out);
  return (args, body) => Promise.resolve(new GraphCommand(body).call(args));
}
