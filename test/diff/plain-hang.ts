/**
 * The plain run's hung steps (program.ts, op `hang`): a body that never settles unless its attempt's
 * signal fires. With a timeout T each attempt times out at T (the engine aborts its signal; a body that
 * ignores it, `deaf`, is abandoned ABANDON_GRACE_UNITS later, and the next attempt starts then); after
 * `attempts` the step rejects ('timeout'), or its second attempt returns after `then` units. Without a
 * timeout it never settles: plain.ts fails it at the late-call bound after run() returned (the engine
 * abandons it: the step fails with CallAbandonedError, which the workflow's code still sees, as it sees
 * a loser's timeout after run() returned), unless the run was cancelled. A cancel does not stop its attempts here: the engine finds it at a heartbeat or at the
 * attempt's end (its failure counted), and delivers the step's outcome as a step's commit does (the
 * workflow's next call stops); if the heartbeat comes first, the durable run stops earlier (a shorter
 * prefix of the plain run's blocks).
 */
import { OpFailure, type Out, type Prims } from './interpret';
import { ABANDON_GRACE_UNITS, GAP_UNITS, hangEnd } from './program';
import type { Drop, PlainResult } from './plain-types';

/** A hung body still live (it holds the run's finish). */
export interface HungBody {
  deaf: boolean;
  /**
   * No timeout: it settles never, unless the engine abandons it after run() returned
   * (`worker.lateCallGraceMs`): then the step fails (CallAbandonedError) and `abandon` rejects it.
   */
  forever: boolean;
  abandon?: (e: Error) => void;
}

/** What the hung steps use of the simulator. */
export interface HangSim {
  now(): number;
  schedule(time: number, what: string, wait: Drop, fire: () => void): void;
  called(label: string, at: number): boolean;
  loser(label: string): boolean;
  ended(): boolean;
  /** The case cannot be compared (why). */
  invalid(why: string): void;
  tags: Set<string>;
  calls: PlainResult['calls'];
  /** Live hung bodies by label. */
  bodies: Map<string, HungBody>;
}

export function plainHang(sim: HangSim): Prims['hang'] {
  const { tags } = sim;
  return (label, op, at) => {
    if (!sim.called(label, at)) return new Promise<Out>(() => undefined);
    const from = sim.now();
    const { fails, returns } = hangEnd(op, from);
    sim.calls.set(label, { kind: 'hang', from, to: fails ?? returns ?? Infinity });
    const T = op.timeout;
    if (T === null)
      return new Promise<Out>((_, abandon) =>
        sim.bodies.set(label, { deaf: op.deaf, forever: true, abandon }),
      );
    sim.bodies.set(label, { deaf: op.deaf, forever: false });
    // A second attempt that returns: its timeout must not compete with its end.
    if (op.attempts === 2 && op.then !== null && T - op.then < GAP_UNITS)
      sim.invalid(`the second attempt of ${label} competes with its timeout`);
    const after = (what: string) => {
      if (sim.loser(label)) tags.add(`hang ${what} after its race`);
      if (sim.ended()) tags.add(`hang ${what} after run() returned`);
    };
    return new Promise<Out>((resolve, reject) => {
      const attempt = (k: number, start: number) => {
        if (k === 2 && op.then !== null)
          return sim.schedule(start + op.then, `hang ${label}`, false, () => {
            sim.bodies.delete(label);
            tags.add('hang: its second attempt returned');
            after('returned');
            resolve({ v: `s:${label}`, t: sim.now() });
          });
        sim.schedule(start + T, `timeout ${label}`, false, () => {
          const last = k >= op.attempts;
          tags.add(last ? 'hang: failed with StepTimeoutError' : 'hang: timed out, retried');
          if (last) {
            after('failed');
            reject(new OpFailure('timeout', sim.now()));
          }
          if (!op.deaf) return last ? void sim.bodies.delete(label) : attempt(k + 1, sim.now());
          sim.schedule(sim.now() + ABANDON_GRACE_UNITS, `abandon ${label}`, false, () => {
            tags.add('hang deaf: abandoned after its grace');
            if (last) sim.bodies.delete(label);
            else attempt(k + 1, sim.now());
          });
        });
      };
      attempt(1, from);
    });
  };
}
