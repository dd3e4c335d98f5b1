/** The plain run's child runs and `ctx.patched` answers (plain.ts says what they mean). */
import { OpFailure, type Out, type Prims } from './interpret';
import { GAP_UNITS, type DiffCase } from './program';
import type { Drop, PlainResult } from './plain-types';

/** What these primitives use of the simulator. */
export interface PrimSim {
  now(): number;
  called(label: string, at: number): boolean;
  schedule(time: number, what: string, wait: Drop, fire: () => void): void;
  loser(label: string): boolean;
  tags: Set<string>;
  calls: PlainResult['calls'];
  /** Steps, commands and hung bodies running. */
  busy(): number;
}

export function plainChild(sim: PrimSim): Prims['child'] {
  const { tags } = sim;
  return (label, d, timeout, at) => {
    if (!sim.called(label, at)) return new Promise<Out>(() => undefined);
    const now = sim.now();
    sim.calls.set(label, { kind: 'child', from: now, to: now + d });
    const to = now + d;
    let done = false;
    return new Promise((resolve, reject) => {
      if (timeout !== null)
        sim.schedule(now + timeout, `timeout ${label}`, true, () => {
          if (done) return;
          done = true;
          tags.add('child wait timed out (child cancelled)');
          reject(new OpFailure('timeout', sim.now()));
        });
      sim.schedule(to, `child ${label}`, true, () => {
        if (done) return;
        done = true;
        if (sim.busy() > 0) tags.add('child ended while its parent ran a call');
        tags.add(timeout === null ? 'child waited for' : 'child waited for with a timeout');
        if (sim.loser(label)) tags.add('loser child ended after its race');
        resolve({ v: `k:${label}`, t: to });
      });
    });
  };
}

/**
 * A child started less than GAP_UNITS before its parent finished, and still going: the parent's end
 * cancels it (parentClose 'cancel'), at once if no worker has begun it yet, so whether its body runs is
 * the machine's timing (a claim's latency). Such a case is not compared: why, or null.
 */
export function childAtTheEnd(calls: PlainResult['calls'], finished: number | null): string | null {
  if (finished === null) return null;
  for (const [label, c] of calls)
    if (c.kind === 'child' && c.to > finished && finished - c.from < GAP_UNITS)
      return `child ${label} starts as its parent ends`;
  return null;
}

export function plainPatched(sim: PrimSim, c: DiffCase): Prims['patched'] {
  const { tags } = sim;
  /** Per patch op: the old code got past its first position; the answer once the new code asked. */
  const oldPassed = new Set<string>();
  const answers = new Map<string, boolean>();
  const onOld = () => c.deploy !== undefined && sim.now() < c.deploy;
  return (label, old) => {
    if (onOld()) {
      // The old code takes the old path without asking. It got past the op's first position once a
      // command or sleep there is called (reserved, due time written), a step once it settled
      // (committed) before the deploy.
      if (old.t !== 'step' || sim.now() + old.d < c.deploy!) oldPassed.add(label);
      return false;
    }
    if (!answers.has(label) && c.deploy !== undefined)
      tags.add(
        oldPassed.has(label) ? 'patch: old path after the deploy' : 'patch: new path after the deploy',
      );
    if (!answers.has(label)) answers.set(label, !oldPassed.has(label));
    tags.add(answers.get(label) ? 'patched in a loop: new path' : 'patched in a loop: old path');
    return answers.get(label)!;
  };
}
