import { AsyncLocalStorage } from 'node:async_hooks';
import type {
  CommandContext,
  CommandMetadata,
  LookupContext,
  LookupResult,
} from '../interfaces/command.interface';
import type { StepMetadata } from '../interfaces/step-options.interface';
import type { TransactionMetadata } from '../interfaces/transaction.interface';
import type { RunContext } from './run-context';

/** What a decorated method needs from the run it is called in. @internal */
export interface StepHost {
  executeStep(meta: StepMetadata, call: () => unknown, args: unknown[]): Promise<unknown>;
  executeTransaction(meta: TransactionMetadata, call: () => unknown, args: unknown[]): Promise<unknown>;
  /** Stops the run for a misuse of the library (a typed usage error) and returns the error to throw. */
  misuse(error: Error): Error;
  executeCommand(
    meta: CommandMetadata,
    args: unknown,
    call: (ctx: CommandContext) => unknown,
    lookup?: (command: string, key: string, context?: LookupContext) => Promise<LookupResult>,
  ): Promise<unknown>;
}

/** The async-local frame: the run being driven and, inside a step, which step. @internal */
export interface RunFrame {
  host: StepHost;
  context: RunContext;
  /**
   * Set while a step body or a command body runs (`command` then): nested steps are plain calls (a step
   * is atomic), values drawn from the context are derived from (run, index, call number) instead of
   * taking a workflow position, and commands, waits and progress are refused.
   */
  step?: { index: number; name: string; derived: number; command?: boolean; attempt?: number };
  /** Set while a command or step body runs with the fenced transport on: its requests check it. */
  gate?: CallGate;
  /**
   * A step body's attempt signal (`ctx.signal` inside the body, made when first asked for): aborted at
   * the step's `timeoutMs`, and whenever the run stops (a cancel, a lost lease, a drain).
   */
  signal?: () => AbortSignal;
  /** Set when the engine abandoned the body (its timeout): what it still calls on the run is refused. */
  revoked?: Error;
}

/**
 * The fenced transport's gate of one live call (see `wire/wire-gate.ts`): a request made inside the
 * call checks it synchronously where its bytes are handed to the socket. @internal
 */
export interface CallGate {
  /** The call is still running. */
  readonly live: boolean;
  /** Undefined lets the request leave; an error aborts it (the run has stopped). */
  check(target: string): Error | undefined;
}

/** @internal */
export const runStorage = new AsyncLocalStorage<RunFrame>();

/** The context of the run this code is executing in (also inside steps), or undefined outside runs. */
export function currentRun(): RunContext | undefined {
  return runStorage.getStore()?.context;
}
