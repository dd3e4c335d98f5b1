/**
 * The programs of the differential test (issue 35 E): small nested trees of steps, commands, sleeps and
 * signal waits under race / any / all / allSettled / sequences / loops / try-catch, with a script of
 * signals arriving at given times. Times are in units (`unitMs` real milliseconds each).
 *
 * The oracle (docs in test/diff/README.md): competing events are kept farther apart than scheduling
 * jitter can shift them, in virtual time. Any two events that are not causally ordered (neither was
 * called in the continuation of the other) are at least `GAP_UNITS` units apart (a case where they are
 * not is never run), and a fault is placed only where nothing happens for longer than a takeover takes.
 */
import fc from 'fast-check';

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
  /** try { await body } catch (e) { 'caught:<why>' } */
  | { t: 'try'; body: Op };

export interface SignalAt {
  name: SignalName;
  /** Arrival (the test sends it) in units after the run began. */
  at: number;
}

export interface DiffCase {
  /** run() awaits these in sequence (labels `0`, `1`, ...). */
  ops: Op[];
  signals: SignalAt[];
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

const name = fc.constantFrom<SignalName>('a', 'b');
const timeout = fc.integer({ min: 1, max: 6 });

function leaf(p: Profile): fc.Arbitrary<Op> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.record({ t: fc.constant('step' as const), d: fc.constantFrom(...p.stepD) }) },
    {
      weight: 2,
      arbitrary: fc.record({ t: fc.constant('cmd' as const), d: fc.integer({ min: 1, max: 3 }) }),
    },
    {
      weight: 2,
      arbitrary: fc.record({ t: fc.constant('sleep' as const), n: fc.integer({ min: 1, max: 6 }) }),
    },
    {
      weight: 4,
      arbitrary: fc.record({
        t: fc.constant('wait' as const),
        name,
        timeout: fc.option(timeout, { freq: 3 }),
      }),
    },
  );
}

/** A wait with a timeout: what try/catch is mostly around. */
const timedWait: fc.Arbitrary<Op> = fc.record({ t: fc.constant('wait' as const), name, timeout });

function node(p: Profile, depth: number): fc.Arbitrary<Op> {
  if (depth === 0) return leaf(p);
  const sub = node(p, depth - 1);
  const kids = fc.array(sub, { minLength: 2, maxLength: 3 });
  const combinator = (t: 'race' | 'any' | 'all' | 'allSettled' | 'seq') =>
    kids.map((ops): Op => ({ t, ops }));
  return fc.oneof(
    { weight: 5, arbitrary: leaf(p) },
    { weight: 3, arbitrary: combinator('race') },
    { weight: 2, arbitrary: combinator('any') },
    { weight: 2, arbitrary: combinator('all') },
    { weight: 2, arbitrary: combinator('allSettled') },
    { weight: 1, arbitrary: combinator('seq') },
    {
      weight: 2,
      arbitrary: fc.record({
        t: fc.constant('loop' as const),
        items: fc.integer({ min: 2, max: 3 }),
        par: fc.boolean(),
        body: sub,
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({ t: fc.constant('try' as const), body: fc.oneof(timedWait, sub) }),
    },
  );
}

/** How many waits of each name the ops make at most (a loop's body once per item). */
export function waitsOf(ops: Op[]): Record<SignalName, number> {
  const n = { a: 0, b: 0 };
  const walk = (o: Op, times: number): void => {
    if (o.t === 'wait') n[o.name] += times;
    else if (o.t === 'loop') walk(o.body, times * o.items);
    else if (o.t === 'try') walk(o.body, times);
    else if ('ops' in o) o.ops.forEach((x) => walk(x, times));
  };
  ops.forEach((o) => walk(o, 1));
  return n;
}

/**
 * A case: up to 4 top-level ops (depth up to 2), and signals for the waits it makes: of each name, up to
 * one more than its waits (some never come, some come before their wait).
 */
export function caseArbitrary(p: Profile = SHORT): fc.Arbitrary<DiffCase> {
  return withSignals(fc.array(node(p, 2), { minLength: 1, maxLength: 4 }), p);
}

/**
 * A case of the fault profile: ops, then an op that outlasts a takeover (a step or command of 12-16
 * units, alone or beside a late timer, a late timeout or a wait), then more ops. The kill lands in it.
 */
export function faultCaseArbitrary(p: Profile = FAULTS): fc.Arbitrary<DiffCase> {
  const long = fc.integer({ min: 12, max: 16 });
  const call = fc.oneof(
    long.map((d): Op => ({ t: 'step', d })),
    long.map((d): Op => ({ t: 'cmd', d })),
  );
  const late = fc.oneof(
    fc.integer({ min: 11, max: 18 }).map((n): Op => ({ t: 'sleep', n })),
    fc.record({
      t: fc.constant('wait' as const),
      name,
      timeout: fc.option(fc.integer({ min: 11, max: 18 })),
    }),
  );
  const beside = fc
    .tuple(fc.constantFrom('race', 'any', 'all', 'allSettled'), call, late, fc.boolean())
    .map(([t, c, l, first]): Op => ({ t: t as 'race', ops: first ? [c, l] : [l, c] }));
  const ops = fc
    .tuple(
      fc.array(node(p, 1), { maxLength: 2 }),
      fc.oneof(call, beside, beside),
      fc.array(node(p, 1), { maxLength: 2 }),
    )
    .map(([before, op, after]) => [...before, op, ...after]);
  return withSignals(ops, p);
}

function withSignals(opsArb: fc.Arbitrary<Op[]>, p: Profile): fc.Arbitrary<DiffCase> {
  const at = fc.integer({ min: GAP_UNITS, max: p.maxUnits - 2 });
  const of = (n: SignalName, waits: number) =>
    fc
      .array(at, { minLength: Math.min(waits, 1), maxLength: waits ? waits + 1 : 0 })
      .map((ats) => ats.map((a) => ({ name: n, at: a })));
  return opsArb.chain((ops) => {
    const w = waitsOf(ops);
    return fc.tuple(of('a', w.a), of('b', w.b)).map(([a, b]) => ({ ops, signals: [...a, ...b] }));
  });
}

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
        return `try { ${op(o.body)} }`;
      default:
        return `${o.t}(${o.ops.map(op).join(', ')})`;
    }
  };
  const sigs = signalScript(c).map((s) => `${s.name}@${s.at}`);
  return `${c.ops.map(op).join(' ; ')} | signals ${sigs.length ? sigs.join(' ') : 'none'}`;
}
