/**
 * Deploys under runs in flight (issue 22), checked from the record and what each claim saw: a `patch`
 * op took exactly one path, the old one (`<id>os`) without the `$patch:<id>` marker or with it false
 * (issue 35: a run that passed the point on the old code records its answer too), or the new one
 * (`<id>ns`) with it true; a run that reached the point only on the new code took the new path; and no
 * run was held for non-determinism.
 */
import type { Program } from './program';
import type { Rows } from './record-checks';
import type { World } from './world';

export function checkPatches(
  rows: Rows,
  world: World,
  runIds: string[],
  programs: Program[],
  short: (id: string) => string,
): string[] {
  const out: string[] = [];
  for (const e of rows.events.filter((x) => x.event_type === 'run.held'))
    out.push(`patch: ${short(e.run_id)} was held: ${JSON.stringify(e.payload)}`);
  runIds.forEach((id, r) => {
    const run = short(id);
    const cps = rows.checkpoints.filter((c) => c.run_id === id);
    for (const op of programs[r].ops) {
      if (op.t !== 'patch') continue;
      const old = cps.some((c) => c.output?.op === `${op.id}os`);
      const next = cps.some((c) => c.output?.op === `${op.id}ns`);
      const markers = cps.filter((c) => c.step_name === `$patch:${op.id}`);
      const marker = markers.some((c) => c.output === true);
      if (old && next) out.push(`patch: ${run} ${op.id} took both paths`);
      if (next && !marker) out.push(`patch: ${run} ${op.id} took the new path without its marker`);
      if (old && marker) out.push(`patch: ${run} ${op.id} recorded the marker but took the old path`);
      if (markers.some((c) => c.output !== true && c.output !== false))
        out.push(`patch: ${run} ${op.id} recorded a marker neither true nor false`);
      const seen = world.observations.filter((o) => o.runId === id && o.op === `${op.id}p`);
      const onlyNew = seen.length > 0 && seen.every((o) => (o.value as { v2: boolean }).v2);
      if (onlyNew && (old || seen.some((o) => !(o.value as { next: boolean }).next)))
        out.push(`patch: ${run} ${op.id} was reached on the new code only but took the old path`);
    }
  });
  return out;
}
