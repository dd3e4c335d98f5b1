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

/** Moves this process's test clock `ms` ahead (`0` and a reset: back to the wall clock). @internal */
export function moveTestClock(ms: number | 'reset'): void {
  offsetMs = ms === 'reset' ? 0 : offsetMs + ms;
}

/** The wall clock as the test clock says (`Date.now()` plus its offset). @internal */
export function clockNow(): number {
  return Date.now() + offsetMs;
}
