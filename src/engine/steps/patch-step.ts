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
 * `ctx.patched(id)`: true on the new code's path, false on the path the run took before the change.
 * True when the run recorded the patch's marker, or has no record past this point (it gets here for
 * the first time: the marker is recorded with the next write). False when the run's record goes on
 * past this point without the marker: it passed here on the code before the patch, and replays it.
 */
export function patchedStep(env: StepEnv, rawId: unknown): boolean {
  const id = check(env, rawId, 'ctx.patched(id)');
  const name = patchMarker(id);
  const index = patchIndex(id);
  if (env.log.recordedAt(index, name)) return true;
  const state = env.log.patchState(index);
  if (state !== 'new') return state === 'marked';
  if (env.replayOnly) throw env.replayOnly.reached(index, name);
  env.log.addPending({ index, name, outputJson: 'true' });
  return true;
}

/**
 * `ctx.deprecatePatch(id)`: in place of `patched(id)` once no run can take the old path any more
 * (`RunRepository.patchStatus`): the code takes the new path always; a run that recorded the marker
 * still replays (the marker is read, not left over). Records nothing.
 */
export function deprecatePatchStep(env: StepEnv, rawId: unknown): void {
  const id = check(env, rawId, 'ctx.deprecatePatch(id)');
  env.log.recordedAt(patchIndex(id), patchMarker(id));
}
