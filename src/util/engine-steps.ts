/**
 * The engine's own entries among a run's checkpoints, as opposed to the user's steps: every name the
 * engine records starts with `$` (values such as `$now` and `$uuid`, waits `$sleep`, `$due`,
 * `$signal:…`, `$deadline:…`, `$child:…`, stream emits `$emit:…`, patch markers `$patch:…`, `$continue`,
 * `$cancelled`, `$schedule:…`) or is a command's outcome (`command:<name>`). @internal
 */
export function isEngineStep(name: string): boolean {
  return name.startsWith('$') || name.startsWith('command:');
}

/** isEngineStep as an SQL condition on the column `step_name`. @internal */
export const ENGINE_STEP_SQL = `(step_name like '$%' or step_name like 'command:%')`;
