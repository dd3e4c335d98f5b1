import { createHash } from 'node:crypto';
import { runStorage } from '../run-storage';
import type { StepEnv } from './step-env';
import { misuse } from './wait-step';

/** A patch id: what `ctx.patched(id)` records, and what `RunRepository.patchStatus` asks about. */
export const PATCH_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/;

/** The marker's checkpoint name. */
export const patchMarker = (id: string): string => `$patch:${id}`;

/**
 * Where a patch's marker is stored: a negative position of its own (from a hash of the id), outside
 * the sequence steps and commands take, so recording it never moves another call's position (and key).
 */
export function patchIndex(id: string): number {
  return -1 - (createHash('sha256').update(id).digest().readUInt32BE(0) & 0x3fffffff);
}

function check(env: StepEnv, id: unknown, what: string): string {
  if (typeof id !== 'string' || !PATCH_ID.test(id))
    misuse(
      env,
      `${what}: id must be 1-100 letters, digits and . _ : - (starting with a letter or digit), got ${JSON.stringify(id)}`,
    );
  if (runStorage.getStore()?.step)
    misuse(env, `${what} must be called in the workflow body, not inside a step or command`);
  env.control.checkActive();
  return id as string;
}

/**
 * `ctx.patched(id)`: true on the new code's path, false on the path the run took before the change. The
 * first call of an id in a run decides for the whole run, and is recorded as the patch's marker (output
 * true or false, with the next write): true when the run gets there at the end of its record (a new run,
 * or one parked before that point), false when its record (or a command it reserved) goes on past that
 * point (it passed there on the code before the patch). Every later call of the id answers the same, on
 * every replay: a run that began on old code finishes the old path, also in a loop (issue 35).
 *
 * A true marker that a release before this rule wrote where the run had already passed calls of the id on
 * the old code (a loop parked mid-way: the old path recorded for the first iterations, the marker written
 * by a later one) answers as the run ran: false where what was recorded before the marker (by claims of
 * lower epochs than the marker's) goes past the call, true from the marker's position on.
 */
export function patchedStep(env: StepEnv, rawId: unknown): boolean {
  const id = check(env, rawId, 'ctx.patched(id)');
  const name = patchMarker(id);
  const index = patchIndex(id);
  const marker = env.log.recordedAt(index, name);
  if (marker) return marker.output === true && (marker.epoch == null || !env.log.passedNext(marker.epoch));
  // Answered earlier in this claim (its marker written since, or not yet): the same answer.
  const answers = claimAnswers.get(env) ?? new Map<number, boolean>();
  const answered = answers.get(index);
  if (answered !== undefined) return answered;
  const passed = env.log.passedNext();
  if (!passed && env.replayOnly) throw env.replayOnly.reached(index, name);
  claimAnswers.set(env, answers.set(index, !passed));
  env.log.addPending({ index, name, outputJson: String(!passed) });
  return !passed;
}

/** The answers `patched` gave in a claim (for both of its phases, `run()` and the cleanup), by marker position. */
const claimAnswers = new WeakMap<StepEnv, Map<number, boolean>>();

/**
 * `ctx.deprecatePatch(id)`: in place of `patched(id)` once no run can take the old path any more
 * (`RunRepository.patchStatus`): the code takes the new path always; a run that recorded the marker
 * true still replays (the marker is read, not left over). Records nothing.
 */
export function deprecatePatchStep(env: StepEnv, rawId: unknown): void {
  const id = check(env, rawId, 'ctx.deprecatePatch(id)');
  env.log.recordedAt(patchIndex(id), patchMarker(id));
}
