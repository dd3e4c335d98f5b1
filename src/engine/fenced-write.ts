import { performance } from 'node:perf_hooks';
import type { CheckpointWrite } from '../store/run-state/fence';
import type { LeaseClock } from './lease-clock';
import type { PausePointName } from './pause-points';
import type { ReplayLog } from './replay-log';
import type { RunControl } from './run-control';

/** What a fenced write uses of its run. @internal */
export interface Writer {
  pause(point: PausePointName, detail?: string): Promise<void> | undefined;
  readonly lease: LeaseClock;
  readonly log: ReplayLog;
  readonly control: RunControl;
  /** A step's commit held for the finish (HeldStep): every other write of the run sends it first. */
  readonly held: { flush(): Promise<void> | undefined };
}

/**
 * A fenced write of a claim (StepEnv.fenced): around it the test-only pause points; the lease counts
 * as renewed from its send time, the pending values it carried are durable, a cancel it reported is
 * remembered. A failure stops the run as RunControl.storeFailed says. A step commit held for the
 * finish (HeldStep) is written first, alone (`flushHeld` false: this is that write).
 * @internal
 */
export async function fencedWrite<T extends object>(
  run: Writer,
  write: () => Promise<T>,
  what: string,
  carried: CheckpointWrite[],
  flushHeld = true,
): Promise<T> {
  const held = flushHeld ? run.held.flush() : undefined;
  if (held) await held; // its failure already stopped the run (storeFailed)
  try {
    const before = run.pause('before-write', what);
    if (before) await before;
    const sentAt = performance.now();
    const out = await write();
    run.lease.renewed(sentAt);
    run.log.durable(carried);
    const after = run.pause('after-write', what);
    if (after) await after;
    if ((out as { cancelRequested?: boolean }).cancelRequested) run.control.cancelRequested = true;
    return out;
  } catch (err) {
    throw run.control.storeFailed(err, `the ${what} write`);
  }
}
