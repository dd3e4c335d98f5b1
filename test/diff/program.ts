/**
 * The programs of the differential test (issue 35 E): small nested trees of steps, commands, sleeps and
 * signal waits under race / any / all / allSettled / sequences / loops / try-catch, with a script of
 * signals arriving at given times. Times are in units (`unitMs` real milliseconds each).
 *
 * Child runs and patches inside loops too. A case may carry a cancel (the test calls
 * RunRepository.cancel) and, in the fault profile, a deploy (old code before it, new code after).
 *
 * The oracle (docs in test/diff/README.md): competing events are kept farther apart than scheduling
 * jitter can shift them, in virtual time. Any two events that are not causally ordered (neither was
 * called in the continuation of the other) are at least `GAP_UNITS` units apart (a case where they are
 * not is never run), and a fault is placed only where nothing happens for longer than a takeover takes.
 */
export type SignalName = 'a' | 'b';

export type Op =
  /** A @DurableStep that takes `d` units; its value is `s:<label>`. */
  | { t: 'step'; d: number }
  /** An @IdempotentCommand that takes `d` units, then makes one effect at the target; value `c:<label>`. */
  | { t: 'cmd'; d: number }
  /** ctx.sleep(n units); value 'slept'. */
  | { t: 'sleep'; n: number }
  /** ctx.waitForSignal(name, { timeoutMs }): the payload's `v`; rejects with a timeout. */
  | { t: 'wait'; name: SignalName; timeout: number | null }
  | { t: 'race' | 'any' | 'all' | 'allSettled' | 'seq'; ops: Op[] }
  /** for (const x of items) await body (seq), or Promise.all(items.map(body)) (par). */
  | { t: 'loop'; items: number; par: boolean; body: Op }
  /**
   * try { await body } catch (e) { n++; 'caught:<why>' (rethrow: throw e) } finally { m++ }: the
   * workflow-local counters n and m end in the outcome (`counts`), each catch and finally in the trace.
   */
  | { t: 'try'; body: Op; rethrow?: boolean }
  /**
   * A @DurableStep whose body hangs: it never settles unless its attempt's AbortSignal fires (`deaf`:
   * not even then). With a timeout (units): each attempt times out then (StepTimeoutError), the policy
   * allows `attempts` (1 or 2); the step then rejects ('timeout'), or with `then` the second attempt
   * returns after `then` units (value `s:<label>`). Without a timeout it settles never: only as a race's
   * loser (the engine abandons it `lateCallGraceMs` after run() returned) or under a cancel.
   */
  | { t: 'hang'; timeout: number | null; attempts: 1 | 2; deaf: boolean; then: number | null }
  /**
   * ctx.child(DiffChild, { d }, { timeoutMs }): a child run whose body is a step of `d` units; its value
   * `k:<label>`; with a timeout it rejects ('timeout') and the child is cancelled.
   */
  | { t: 'child'; d: number; timeout: number | null }
  /** for (const x of items) ctx.patched(id) ? await a : await b (the old code: b, without asking). */
  | { t: 'patch'; items: number; a: Op; b: Op };

export interface SignalAt {
  name: SignalName;
  /** Arrival (the test sends it) in units after the run began. */
  at: number;
}

export interface DiffCase {
  /** run() awaits these in sequence (labels `0`, `1`, ...). */
  ops: Op[];
  signals: SignalAt[];
  /** The test cancels the run (RunRepository.cancel) this many units after it began. */
  cancel?: number;
  /**
   * Fault profile: a deploy this many units after the run began. Before it, the workers run the old
   * code (a patch op takes its old path without asking `patched`); from it on, the new code.
   */
  deploy?: number;
}

/** What the durable workflow gets as its input. */
export interface DiffInput {
  ops: Op[];
  unitMs: number;
  /** Test-only: a deliberately wrong interpreter (the power check). */
  mutation?: Mutation;
}

export const MUTATIONS = ['race-as-all', 'sleep-skip', 'any-as-race'] as const;
export type Mutation = (typeof MUTATIONS)[number];

/** Two events not causally ordered are at least this many units apart. */
export const GAP_UNITS = 2;
/** The real length of a unit: GAP_UNITS units = 400 ms between competing events. */
export const UNIT_MS = 200;

/**
 * The engine's bounds, in units of UNIT_MS (plain.ts models them): a timed-out body that ignores its
 * signal is abandoned ABANDON_GRACE_MS after its timeout (retry.ts; the next attempt starts then).
 */
export const ABANDON_GRACE_UNITS = 5000 / UNIT_MS;
/**
 * The durable rigs' `worker.lateCallGraceMs` (setup.ts, worker.ts): calls still live that long after
 * run() returned are abandoned (a hung loser), and the run finishes. Shorter than the default 30 s so
 * that a case with a hung loser lasts seconds; longer than any other call of a case lives after run().
 */
export const LATE_CALL_GRACE_MS = 3000;
/** The same in units (plain.ts); null would be no bound (a run never finishes while a call hangs). */
export const LATE_CALL_GRACE_UNITS: number | null = LATE_CALL_GRACE_MS / UNIT_MS;
/**
 * How long after a cancel the durable run may take to end, beyond the plain run's end, when a hung
 * body runs: the heartbeat that finds the cancel (the default 10 s) plus, for a body that ignores its
 * signal, the stop's grace (STOP_GRACE_MS, 5 s).
 */
export const HEARTBEAT_MS = 10_000;
export const STOP_GRACE_MS = 5000;

/** A hang op called at `at`: when it rejects (`fails`), when its second attempt returns, or never. */
export function hangEnd(
  o: Extract<Op, { t: 'hang' }>,
  at: number,
): { fails: number | null; returns: number | null } {
  if (o.timeout === null) return { fails: null, returns: null };
  const gap = o.deaf ? ABANDON_GRACE_UNITS : 0; // the next attempt waits for the timed-out body's grace
  if (o.attempts === 2 && o.then !== null) return { fails: null, returns: at + o.timeout + gap + o.then };
  return { fails: at + o.attempts * o.timeout + (o.attempts - 1) * gap, returns: null };
}

/** The label of child `i` of the op labelled `parent` (loops: item `x`, with '/'). */
export const childLabel = (parent: string, i: number) => `${parent}.${i}`;
export const itemLabel = (parent: string, x: number) => `${parent}/${x}`;

export interface Profile {
  /** Step durations (units). */
  stepD: number[];
  /** A case lasts at most this many units. */
  maxUnits: number;
}

export const SHORT: Profile = { stepD: [1, 2, 3, 4, 5], maxUnits: 14 };
/** With faults (faultCaseArbitrary): a long op in the middle, where the kill lands. */
export const FAULTS: Profile = { stepD: [1, 2, 3, 4, 5], maxUnits: 30 };

/** Signals in arrival order, each with its payload value `<name>#<k>` (k-th of its name). */
export function signalScript(c: DiffCase): { name: SignalName; at: number; v: string; index: number }[] {
  const count: Record<string, number> = {};
  return [...c.signals]
    .map((s, index) => ({ ...s, index }))
    .sort((x, y) => x.at - y.at || x.index - y.index)
    .map((s) => ({ ...s, v: `${s.name}#${(count[s.name] = (count[s.name] ?? 0) + 1)}` }));
}

/** A case in one line: `race(step 2, wait a ≤3) ; sleep 4 | signals a@5 b@9`. */
export function describeCase(c: DiffCase): string {
  const op = (o: Op): string => {
    switch (o.t) {
      case 'step':
      case 'cmd':
        return `${o.t} ${o.d}`;
      case 'sleep':
        return `sleep ${o.n}`;
      case 'wait':
        return `wait ${o.name}${o.timeout === null ? '' : ` ≤${o.timeout}`}`;
      case 'loop':
        return `for x of [${o.items}]${o.par ? ' all' : ''} { ${op(o.body)} }`;
      case 'try':
        return `try { ${op(o.body)} }${o.rethrow ? ' rethrow' : ''}`;
      case 'hang':
        return `hang${o.deaf ? ' deaf' : ''}${o.timeout === null ? '' : ` ≤${o.timeout}×${o.attempts}${o.then === null ? '' : ` then ${o.then}`}`}`;
      case 'child':
        return `child ${o.d}${o.timeout === null ? '' : ` ≤${o.timeout}`}`;
      case 'patch':
        return `for x of [${o.items}] { patched ? ${op(o.a)} : ${op(o.b)} }`;
      default:
        return `${o.t}(${o.ops.map(op).join(', ')})`;
    }
  };
  const sigs = signalScript(c).map((s) => `${s.name}@${s.at}`);
  const extra = `${c.cancel === undefined ? '' : ` | cancel@${c.cancel}`}${c.deploy === undefined ? '' : ` | deploy@${c.deploy}`}`;
  return `${c.ops.map(op).join(' ; ')} | signals ${sigs.length ? sigs.join(' ') : 'none'}${extra}`;
}
