import type { AdminRunDetail } from '../admin/admin-runs.service';
import { isEngineStep } from '../util/engine-steps';

/**
 * `show` without `--all`: a run's detail with the engine's entries left out of its steps and
 * checkpoints (recorded values and waits, `$…`; commands, listed in their own section). @internal
 */
export function withoutEngineEntries(d: AdminRunDetail): AdminRunDetail {
  return {
    ...d,
    checkpoints: d.checkpoints.filter((c) => !isEngineStep(c.stepName)),
    timeline: {
      ...d.timeline,
      steps: d.timeline.steps.filter((s) => s.kind !== 'command' && !isEngineStep(s.name)),
    },
  };
}
