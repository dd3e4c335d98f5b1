/**
 * The generators of the differential test's cases (program.ts says what a case is): nested ops, signals
 * for the waits they make, sometimes a cancel; the fault profile's cases have a long op for the kill.
 */
import fc from 'fast-check';
import { FAULTS, GAP_UNITS, SHORT, type DiffCase, type Op, type Profile, type SignalName } from './program';

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
    {
      weight: 2,
      arbitrary: fc.record({
        t: fc.constant('child' as const),
        d: fc.constantFrom(...p.stepD),
        timeout: fc.option(timeout, { freq: 2 }),
      }),
    },
    { weight: 2, arbitrary: timedHang },
    { weight: 1, arbitrary: hungForever },
  );
}

/**
 * A hung step with a timeout: one or two attempts, the second perhaps returning; rarely deaf to its
 * signal (its next attempt then waits for the 5 s grace: valid as a race's loser).
 */
const timedHang: fc.Arbitrary<Op> = fc
  .record({
    timeout: fc.integer({ min: 1, max: 5 }),
    attempts: fc.constantFrom<1 | 2>(1, 2),
    deaf: fc.boolean().chain((b) => (b ? fc.boolean() : fc.constant(false))), // a quarter
    returns: fc.boolean(),
  })
  .chain(({ returns, ...h }) =>
    h.attempts === 2 && returns
      ? // The second attempt returns, GAP_UNITS before its own timeout at least.
        fc
          .integer({ min: GAP_UNITS + 1, max: 6 })
          .chain((timeout) =>
            fc
              .integer({ min: 1, max: timeout - GAP_UNITS })
              .map((then): Op => ({ t: 'hang', ...h, timeout, then })),
          )
      : fc.constant<Op>({ t: 'hang', ...h, then: null }),
  );

/** A hung step without a timeout: it never settles (a race's loser, or a run that is cancelled). */
const hungForever: fc.Arbitrary<Op> = fc
  .boolean()
  .map((deaf): Op => ({ t: 'hang', timeout: null, attempts: 1, deaf, then: null }));

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
    { weight: 3, arbitrary: tryOf(p, sub) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.constantFrom<'race' | 'any'>('race', 'any'), hungForever, sub, fc.boolean())
        .map(([t, h, o, first]): Op => ({ t, ops: first ? [h, o] : [o, h] })),
    },
    { weight: 1, arbitrary: patchOf(p) },
  );
}

/**
 * try { body } catch { n++ (rethrow) } finally { m++ }: around a timed wait, a sequence of leaves
 * (`try { await sleep; await step }`: a park inside, then a call), a hung step, or any node (nested
 * tries, races, loops).
 */
function tryOf(p: Profile, sub: fc.Arbitrary<Op>): fc.Arbitrary<Op> {
  const seqOf = fc
    .array(fc.oneof(leaf(p), timedWait, timedHang), { minLength: 2, maxLength: 3 })
    .map((ops): Op => ({ t: 'seq', ops }));
  return fc.record({
    t: fc.constant('try' as const),
    body: fc.oneof(timedWait, seqOf, timedHang, sub),
    rethrow: fc.boolean().chain((b) => (b ? fc.boolean() : fc.constant(false))),
  });
}

/** for x of [n] { patched ? a : b }, a and b leaves (a step, a command or a sleep). */
function patchOf(p: Profile): fc.Arbitrary<Op> {
  const branch = fc.oneof(
    fc.record({ t: fc.constant('step' as const), d: fc.constantFrom(...p.stepD) }),
    fc.record({ t: fc.constant('cmd' as const), d: fc.integer({ min: 1, max: 3 }) }),
    fc.record({ t: fc.constant('sleep' as const), n: fc.integer({ min: 1, max: 4 }) }),
  );
  return fc.record({
    t: fc.constant('patch' as const),
    items: fc.integer({ min: 2, max: 3 }),
    a: branch,
    b: branch,
  });
}

/** How many waits of each name the ops make at most (a loop's body once per item). */
export function waitsOf(ops: Op[]): Record<SignalName, number> {
  const n = { a: 0, b: 0 };
  const walk = (o: Op, times: number): void => {
    if (o.t === 'wait') n[o.name] += times;
    else if (o.t === 'loop') walk(o.body, times * o.items);
    else if (o.t === 'try') walk(o.body, times);
    else if (o.t === 'patch') [o.a, o.b].forEach((x) => walk(x, times * o.items));
    else if ('ops' in o) o.ops.forEach((x) => walk(x, times));
  };
  ops.forEach((o) => walk(o, 1));
  return n;
}

/**
 * A case: up to 4 top-level ops (depth up to 2), signals for the waits it makes (of each name, up to
 * one more than its waits: some never come, some come before their wait), and in a third of the cases
 * a cancel at some time of the run.
 */
export function caseArbitrary(p: Profile = SHORT): fc.Arbitrary<DiffCase> {
  const cancel = fc.oneof(
    { weight: 2, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fc.integer({ min: GAP_UNITS, max: p.maxUnits - 2 }) },
  );
  return fc
    .tuple(withSignals(fc.array(node(p, 2), { minLength: 1, maxLength: 4 }), p), cancel)
    .map(([c, at]) => (at === undefined ? c : { ...c, cancel: at }));
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
