import { performance } from 'node:perf_hooks';
import { LeaseLostError } from '../errors/lease-lost.error';
import { LeaseClock } from './lease-clock';
import { RunControl } from './run-control';

/**
 * A run a start handed to its worker (hand-off) begins under the worker's short hand-off lease, not a
 * full TTL: the local clock holds it to that lease (its margins are a third of it, so the run begins at
 * once), renews it to the full TTL at a third of it when no write did, and stops the run when that
 * renewal finds the run gone.
 */
describe('LeaseClock of a handed run', () => {
  const clocks: LeaseClock[] = [];
  afterEach(() => clocks.splice(0).forEach((c) => c.close()));
  const TTL = 3000;

  function handed(leaseMs: number, alive = true) {
    const control = new RunControl('run-1', false, null, () => undefined);
    const renewals: number[] = [];
    const renew = () => {
      renewals.push(performance.now());
      return Promise.resolve({ alive, cancelRequested: false });
    };
    const lease = new LeaseClock(
      'run-1',
      1,
      { sentAt: performance.now(), leaseMs },
      TTL,
      control,
      renew,
      100,
    );
    clocks.push(lease);
    return { lease, control, renewals };
  }

  it('begins without renewing: the margin is a third of the hand-off lease, not of the TTL', () => {
    const { lease, renewals } = handed(300);
    expect(lease.ensure('step body')).toBeUndefined(); // no renewal needed before the body
    expect(renewals).toHaveLength(0);
    // The local deadline is the hand-off's: 300 ms from the read, not the TTL.
    expect(lease.expiresAt().getTime()).toBeLessThan(Date.now() + 400);
  });

  it('renews to the full TTL at a third of the hand-off lease when nothing was written', async () => {
    const { lease, renewals, control } = handed(300);
    await new Promise((r) => setTimeout(r, 200));
    expect(renewals).toHaveLength(1);
    expect(control.stop).toBeNull();
    expect(lease.expiresAt().getTime()).toBeGreaterThan(Date.now() + TTL - 500);
  });

  it('a write before then is the renewal: the timer sends nothing', async () => {
    const { lease, renewals } = handed(300);
    lease.renewed(performance.now()); // a step's commit
    await new Promise((r) => setTimeout(r, 200));
    expect(renewals).toHaveLength(0);
  });

  it('a renewal that finds the run taken back stops it as a lost lease', async () => {
    const { control, renewals } = handed(300, false);
    await new Promise((r) => setTimeout(r, 200));
    expect(renewals).toHaveLength(1);
    expect(control.stop?.kind).toBe('lease-lost');
    expect(control.error).toBeInstanceOf(LeaseLostError);
  });
});
