import type { StartRunResult } from './run.interface';

/** Options of `RunRepository.fork` (docs/TIME-TRAVEL.md). */
export interface ForkRunOptions<I = unknown> {
  /**
   * The first position the fork executes itself: a step index as the run's checkpoints, its history and
   * the inspector number them (steps, commands, recorded values and waits share one sequence). What the
   * original recorded before it is inherited: replayed from the fork's own copy, never executed or sent
   * again. From it on the fork runs its code, and its commands get keys of their own (the fork's run id).
   * The positions before it must be a moment the original passed through: a cut through calls that ran
   * concurrently is refused (ForkRefusedError, naming the nearest steps that are not).
   */
  fromStep: number;
  /**
   * The version of the kind the fork runs under (`@DurableWorkflow(kind, { version })`: a fixed deploy).
   * Default: the original's. The positions it inherits must replay under it (else the fork is held for
   * non-determinism, as any run whose code does not replay its record).
   */
  version?: number;
  /** The fork's input. Default: the original's (its current generation's). Inherited calls must not depend on what changed. */
  input?: I;
  /**
   * A new result for the last position the fork inherits (the one that reached the workflow last before
   * `fromStep`; a step or a command): the fork's code gets `value` there instead of what the original
   * recorded (LangGraph's `updateState`). Only there: a later inherited call may have been made from it.
   * For a command, the command is recorded as succeeded with `value` as its result (nothing is sent).
   */
  editResult?: { step: number; value: unknown };
  /**
   * What happens to an original that has not ended (`pending`, `running`, `waiting`; required then):
   * `'leave'` it going beside its fork (two runs, keyed apart), or `'cancel'` it in the fork's own
   * statement (it ends `cancelled` at once, its `onCancel` does not run, a worker that holds it is fenced
   * out and the fork is due when that worker's lease ends). `'cancel'` is refused for an ended run.
   */
  original?: 'leave' | 'cancel';
  /** As `StartRunOptions.idempotencyKey`: a second fork with this key returns the first one (`created: false`). */
  idempotencyKey?: string;
  /** Who asked: kept in the events of both runs. */
  by?: string;
  /**
   * The fork's commands (at or after `fromStep`) send the original's keys (`run_<original>:step_<n>:<name>`)
   * instead of their own: a target that deduplicates by key answers a command the original sent with the
   * original's effect instead of acting again (a target that checks a key's parameters refuses other
   * arguments under it); one the original never sent acts under the original's key. The fork's command
   * rows keep keys of its own. Children and values drawn in steps are still the fork's. Default false.
   */
  keepKeys?: boolean;
  /**
   * Rewind in place: the run itself (failed or dead-lettered) goes back to `fromStep` under its own id,
   * for systems that know its id. What it recorded from there is archived (`ai_rewound_checkpoints`),
   * and it runs on under its next generation, whose keys are apart from those it used. Refused while a
   * command of it has no recorded outcome. Not with `original` or `idempotencyKey`.
   */
  inPlace?: boolean;
}

/** Result of `RunRepository.fork`: the fork, as `start` returns a run, and how much it inherited. */
export interface ForkRunResult<I = unknown, O = unknown> extends StartRunResult<I, O> {
  /** Checkpoints copied from the original (0 when `created` is false). */
  inherited: number;
}
