import { StepTimeoutError } from '../errors';
import { withTimeout } from '../engine/retry';
import { longTimeout, MAX_TIMER_MS } from './timers';

describe('timers past 2^31-1 ms (issue 19 item 8)', () => {
  const DAY = 24 * 3600_000;

  it('a 30-day step timeout does not fire at once', async () => {
    const p = new Promise((r) => setTimeout(() => r('done'), 50));
    await expect(withTimeout(p, 30 * DAY, 'slow_step')).resolves.toBe('done');
  });

  it('a timer longer than setTimeout allows is a chain that fires at its time, not before', () => {
    jest.useFakeTimers();
    try {
      const fired = jest.fn();
      longTimeout(fired, MAX_TIMER_MS + 5000);
      jest.advanceTimersByTime(MAX_TIMER_MS);
      expect(fired).not.toHaveBeenCalled();
      jest.advanceTimersByTime(4999);
      expect(fired).not.toHaveBeenCalled();
      jest.advanceTimersByTime(1);
      expect(fired).toHaveBeenCalledTimes(1);
    } finally {
      jest.useRealTimers();
    }
  });

  it('a 30-day timeout still rejects with StepTimeoutError when its time comes', async () => {
    jest.useFakeTimers();
    try {
      const never = new Promise<never>(() => undefined);
      const timed = withTimeout(never, 30 * DAY, 'slow_step');
      const seen = timed.catch((e: unknown) => e);
      jest.advanceTimersByTime(30 * DAY - 1);
      await Promise.resolve();
      jest.advanceTimersByTime(1);
      expect(await seen).toBeInstanceOf(StepTimeoutError);
    } finally {
      jest.useRealTimers();
    }
  });

  it('cancel stops every link of the chain', () => {
    jest.useFakeTimers();
    try {
      const fired = jest.fn();
      const t = longTimeout(fired, 3 * MAX_TIMER_MS);
      jest.advanceTimersByTime(MAX_TIMER_MS + 10);
      t.cancel();
      jest.advanceTimersByTime(3 * MAX_TIMER_MS);
      expect(fired).not.toHaveBeenCalled();
    } finally {
      jest.useRealTimers();
    }
  });
});
