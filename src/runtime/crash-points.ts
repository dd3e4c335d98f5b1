/**
 * Named crash points for crash tests: inert unless `DURABLE_CRASH_AT` is set when the process starts.
 * `DURABLE_CRASH_AT=after-step-commit@3` kills the process (SIGKILL, as a deploy or OOM would) when
 * the point is reached for step index 3; `after-step-commit` without `@` fires on the first hit.
 * Read once; when unset, `crashPoint` is a single boolean test.
 */
export type CrashPointName =
  | 'after-model-output'
  | 'before-step-commit'
  | 'after-step-commit'
  | 'after-command-reserve'
  | 'after-command-dispatch'
  | 'before-heartbeat'
  | 'during-drain';

const spec = process.env.DURABLE_CRASH_AT;
const armed = !!spec;
const [armedName, armedAt] = (spec ?? '').split('@');

/** Dies on the spot when this point (and step index, if given) is the armed one. */
export function crashPoint(name: CrashPointName, stepIndex?: number): void {
  if (!armed || name !== armedName) return;
  if (armedAt !== undefined && String(stepIndex) !== armedAt) return;
  process.kill(process.pid, 'SIGKILL');
}
