/** The longest delay `setTimeout` honours; a longer one fires after 1 ms (Node's TimeoutOverflowWarning). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** A timer of any length. */
export interface LongTimer {
  cancel(): void;
}

/**
 * `setTimeout` for any delay: one longer than MAX_TIMER_MS (about 24.8 days) is a chain of shorter
 * ones, so a 30-day step timeout fires after 30 days, not at once. `unref` timers do not keep the
 * process alive.
 */
export function longTimeout(fn: () => void, ms: number, unref = false): LongTimer {
  let timer: NodeJS.Timeout;
  const arm = (left: number) => {
    timer = setTimeout(
      () => (left > MAX_TIMER_MS ? arm(left - MAX_TIMER_MS) : fn()),
      Math.max(0, Math.min(left, MAX_TIMER_MS)),
    );
    if (unref) timer.unref();
  };
  arm(Number.isFinite(ms) ? ms : Number.MAX_SAFE_INTEGER);
  return { cancel: () => clearTimeout(timer) };
}
