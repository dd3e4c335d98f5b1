/**
 * The test kit's clock offset (`advanceTestClock` in `/testing`): how far this process has skipped
 * ahead. It moves `ctx.now()` only; what timers compare in the database (a sleep's due time, a signal
 * wait's deadline) is moved by the store, and leases never move. Zero outside tests. @internal
 */
let offsetMs = 0;

/** Milliseconds this process's test clock has skipped. @internal */
export function testClockOffsetMs(): number {
  return offsetMs;
}

/** Time `driveRun` skipped for one run only (its sleeps and timeouts): that run's `ctx.now()` sees it. */
const runOffsets = new Map<string, number>();

/** Moves this process's test clock `ms` ahead (`0` and a reset: back to the wall clock). @internal */
export function moveTestClock(ms: number | 'reset'): void {
  offsetMs = ms === 'reset' ? 0 : offsetMs + ms;
  if (ms === 'reset') runOffsets.clear();
}

/** Moves the test clock of run `runId` alone `ms` ahead (what `driveRun` skipped for it). @internal */
export function moveRunClock(runId: string, ms: number): void {
  runOffsets.set(runId, (runOffsets.get(runId) ?? 0) + ms);
}

/** The wall clock as the test clock says (`Date.now()` plus its offset, and run `runId`'s own). @internal */
export function clockNow(runId?: string): number {
  return Date.now() + offsetMs + (runId === undefined ? 0 : (runOffsets.get(runId) ?? 0));
}
