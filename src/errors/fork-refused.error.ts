import { DurableExecutionError } from './durable-execution.error';

/**
 * A fork of run `runId` from `fromStep` was refused: the cut would inherit something the original has
 * not settled, or a state the original never was in. Nothing was written; the message says what to do
 * (settle the command, wait for the child, or fork from another step, naming the nearest ones).
 * With `DurableExceptionFilter`, a 409. `reason`:
 * - `concurrent`: `fromStep` cuts through calls that ran concurrently (a `Promise.all`, a race): a
 *   position before it reached the workflow after one at or past it, so no moment of the original's
 *   history had exactly the positions before `fromStep` recorded;
 * - `unsettled-command`: a command before `fromStep` has no recorded outcome (in doubt, awaiting
 *   approval, approved, or settled by an operator and not yet replayed by the run);
 * - `running-child`: a child run started before `fromStep` has not ended, and the fork does not inherit
 *   its end (its end reaches the original, never the fork).
 */
export class ForkRefusedError extends DurableExecutionError {
  declare readonly code: 'DURABLE_FORK_REFUSED';
  constructor(
    /** The run a fork was asked of. */
    public readonly runId: string,
    /** The step it was asked from. */
    public readonly fromStep: number,
    /** Why it was refused (see above). */
    public readonly reason: 'concurrent' | 'unsettled-command' | 'running-child',
    /** The position that blocks the cut. */
    public readonly position: number,
    detail: string,
    /** For `unsettled-command`: the command's idempotency key. */
    public readonly commandKey?: string,
    /** For `running-child`: the child run's id. */
    public readonly childId?: string,
  ) {
    super(
      'DURABLE_FORK_REFUSED',
      `Cannot fork run ${runId} from step ${fromStep}: ${detail} Nothing was written.`,
    );
  }
}
