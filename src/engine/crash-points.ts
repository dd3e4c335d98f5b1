/**
 * Named crash points for crash tests: inert unless `DURABLE_CRASH_AT` is set when the process starts.
 * `DURABLE_CRASH_AT=after-step-commit@3` kills the process (SIGKILL, as a deploy or OOM would) when
 * the point is reached for step index 3; `after-step-commit` without `@` fires on the first hit.
 * Read once; when unset, `crashPoint` is a single boolean test. With `DURABLE_CRASH_LOG=<file>` the
 * point's name is appended to that file just before the process dies.
 */
export type CrashPointName =
  | 'after-model-output'
  | 'before-step-commit'
  | 'after-step-commit'
  | 'after-command-reserve'
  | 'after-command-dispatch'
  | 'before-heartbeat'
  | 'during-drain'
  | 'after-child-start'
  | 'before-transaction-sql'
  | 'before-transaction-commit'
  | 'after-transaction-commit';

import { appendFileSync } from 'node:fs';

const spec = process.env.DURABLE_CRASH_AT;
const armed = !!spec;
const [armedName, armedAt] = (spec ?? '').split('@');

/** Dies on the spot when this point (and step index, if given) is the armed one. */
export function crashPoint(name: CrashPointName, stepIndex?: number): void {
  if (!armed || name !== armedName) return;
  if (armedAt !== undefined && String(stepIndex) !== armedAt) return;
  // A harness can learn which point really fired (a SIGKILL from outside looks the same).
  const log = process.env.DURABLE_CRASH_LOG;
  if (log) appendFileSync(log, `${name}\n`);
  process.kill(process.pid, 'SIGKILL');
}

/**
 * This point is armed for `stepIndex` (or for any index): the engine then gives the point the moment it
 * names, e.g. a last step's commit is not fused into the finish while `after-step-commit` is armed for
 * it (a crash there must find the step committed and the run not finished).
 */
export function crashArmed(name: CrashPointName, stepIndex: number): boolean {
  return armed && name === armedName && (armedAt === undefined || String(stepIndex) === armedAt);
}
