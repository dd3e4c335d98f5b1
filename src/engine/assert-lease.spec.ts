import { performance } from 'node:perf_hooks';
import { inCall, testLease } from '../../test/helpers/call-gate';
import { LeaseLostError } from '../errors/lease-lost.error';
import { LeaseClock } from './lease-clock';
import { RunContext } from './run-context';
import type { RunContextHost } from './run-context-host';
import { RunControl } from './run-control';

/**
 * `ctx.assertLease()`: synchronous, for a write the library cannot see. Inside a gated call it is the
 * call's wire check; elsewhere the run's lease against the same margin. A refusal stops the run as a
 * lost lease does (its signal aborts) and throws LeaseLostError.
 */
describe('ctx.assertLease()', () => {
  const clocks: LeaseClock[] = [];
  afterAll(() => clocks.forEach((c) => c.close()));

  /** A run's context over a lease whose local deadline is `leftMs` away. */
  function run(leftMs: number, wireMarginMs: number | null = 100) {
    const control = new RunControl('run-1', false, null, () => undefined);
    const ttl = 1000;
    const renew = () => Promise.resolve({ alive: true, cancelRequested: false });
    const start = performance.now() - ttl + leftMs;
    const lease = new LeaseClock('run-1', 3, start, ttl, control, renew, wireMarginMs);
    clocks.push(lease);
    return { ctx: new RunContext({ lease } as unknown as RunContextHost), control, lease };
  }

  it('passes while the lease holds for the wire margin', () => {
    const { ctx, control } = run(500);
    expect(() => ctx.assertLease()).not.toThrow();
    expect(control.stop).toBeNull();
  });

  it('outside a call: throws LeaseLostError within the margin, and the run stops as on a lost lease', () => {
    const { ctx, control } = run(50); // 50 ms left, margin 100
    expect(() => ctx.assertLease()).toThrow(LeaseLostError);
    expect(control.stop?.kind).toBe('lease-lost');
    expect(control.signal.aborted).toBe(true);
    expect(() => ctx.assertLease()).toThrow(LeaseLostError); // and from then on
  });

  it('with the fenced transport off, the margin is a tenth of the lease', () => {
    expect(() => run(150, null).ctx.assertLease()).not.toThrow();
    expect(() => run(50, null).ctx.assertLease()).toThrow(LeaseLostError);
  });

  it("inside a call: the call's gate makes the check", async () => {
    const { ctx } = run(500);
    const held = testLease();
    await inCall(held, async () => ctx.assertLease());
    expect(held.checks).toBe(1);
    const lost = testLease(true);
    await expect(inCall(lost, async () => ctx.assertLease())).rejects.toThrow('lease lost (test)');
  });

  it("inside a gated call of this run's lease: a deadline passed is refused at once", async () => {
    const { ctx, lease, control } = run(50);
    const gate = lease.gate('step charge')!;
    const { gated } = await import('./wire/wire-gate');
    const frame = { gate } as never;
    await expect(gated(frame, async () => ctx.assertLease())).rejects.toThrow(
      /the wire check of step charge before ctx\.assertLease\(\)/,
    );
    expect(control.stop?.kind).toBe('lease-lost');
  });
});
