import type { PatchStatus } from '../interfaces/run.interface';
import type { Operator } from './operator-context';

type Out = (line: string) => void;
type Print = (value: unknown, human: () => void) => void;

/** The operator commands this module runs. @internal */
export const SCHEDULE_PATCH_COMMANDS = ['trigger', 'patch-status'];

/** `patch-status`, for a person: the two counts and what they allow. */
function printPatchStatus(out: Out, s: PatchStatus): void {
  out(`patch ${s.patchId} of ${s.kind}:`);
  for (const [label, value] of [
    ['open runs on the new path', s.openWithPatch],
    ['open runs that may take the old path', s.openMayTakeOldPath],
    ['first marked', s.firstMarkedAt ? new Date(s.firstMarkedAt).toISOString() : '-'],
  ])
    out(`  ${`${label}:`.padEnd(38)}${value}`);
  out(
    s.openMayTakeOldPath === 0
      ? `  no open run takes the old path: replace patched('${s.patchId}') with deprecatePatch('${s.patchId}')`
      : '  keep patched() until the old-path runs have ended',
  );
}

/**
 * Runs `trigger SCHEDULE` (fires the schedule now: `ScheduleRunner.fireNow`, the testing kit's
 * `fireSchedule`; prints the ids of the runs it started, one a line) and `patch-status KIND PATCH`
 * (`RunRepository.patchStatus`). @internal
 */
export async function schedulePatchCommand(
  command: string,
  words: string[],
  op: Operator,
  print: Print,
  out: Out,
): Promise<void> {
  const [first, second] = words;
  if (command === 'trigger') {
    const runIds = await op.firer.fireNow(first);
    print({ schedule: first, runIds }, () => {
      for (const id of runIds) out(id);
      if (!runIds.length)
        out(`no run started: the overlap policy of ${first} held the tick back, or its run exists`);
    });
    return;
  }
  const status = await op.runs.patchStatus(first, second);
  print(status, () => printPatchStatus(out, status));
}
