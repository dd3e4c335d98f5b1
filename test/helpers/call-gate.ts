import type { RunFrame } from '../../src/engine/run-storage';
import { gated, WireGate } from '../../src/engine/wire/wire-gate';

/**
 * The lease of a run as the fenced transport's unit specs drive it: the test sets its verdict and
 * counts its wire checks (src/engine/wire/*.spec.ts, src/store/pg-wire-hook.spec.ts).
 */
export interface TestLease {
  refuse: boolean;
  checks: number;
}

export const testLease = (refuse = false): TestLease => ({ refuse, checks: 0 });

/** One call of that run (a gate of its own, ended when the body settles), as the engine runs it. */
export function inCall<T>(l: TestLease, body: () => T): T {
  const gate = new WireGate(() => {
    l.checks++;
    return l.refuse ? new Error('lease lost (test)') : undefined;
  }, 'test call');
  return gated({ gate } as unknown as RunFrame, body);
}

/** A pause for bytes in flight on loopback to arrive (or not). */
export const settle = (ms = 150): Promise<void> => new Promise((r) => setTimeout(r, ms));
