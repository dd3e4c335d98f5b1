/**
 * The differential property: for every generated case that the plain run says can be compared (see
 * cases.ts), the durable run's output, effects and order of events equal the plain run's. Cases come
 * from fast-check (seeded), run `concurrency` at a time; the first divergent case is then shrunk with
 * fast-check (replayed by its path, one case at a time, within `shrinkMs`).
 */
import fc from 'fast-check';
import { prepare, type Prepared } from './cases';
import { compare, runDurable, type DurableEnv, type DurableResult, type Fault } from './harness';
import { caseArbitrary, faultCaseArbitrary } from './generate';
import { describeCase, FAULTS, type DiffCase, type Mutation, type Profile } from './program';

/** The cases of a profile: the fault profile's have a long op to kill a worker in. */
const arbitraryOf = (p: Profile) => (p === FAULTS ? faultCaseArbitrary(p) : caseArbitrary(p));

export interface DiffOptions {
  cases: number;
  seed: number;
  profile: Profile;
  concurrency: number;
  mutation?: Mutation;
  /** Shrink the first divergent case for at most this long (0: no shrinking). */
  shrinkMs: number;
  /** A fault for a case, or null (its kill window comes from the plain run). */
  fault?: (p: Prepared) => Fault | null;
  /** Only the comparable cases this accepts (the fault profile: those with a kill window). */
  accept?: (p: Prepared) => boolean;
  log?: (line: string) => void;
}

export interface CaseRun {
  /** Index in the seeded sequence (fast-check's path). */
  index: number;
  p: Prepared;
  durable: DurableResult;
  divergences: string[];
  ms: number;
}

export interface DiffReport {
  seed: number;
  /** Generated cases looked at, and those not run (why, counted). */
  generated: number;
  skipped: Map<string, number>;
  runs: CaseRun[];
  divergent: CaseRun[];
  /** Per rule: cases that exercised it. */
  coverage: Map<string, number>;
  shrunk: CaseRun | null;
  shrinks: number;
  ms: number;
}

/** The first `n` comparable cases of the seeded sequence, with their indexes. */
export async function comparableCases(
  seed: number,
  n: number,
  profile: Profile,
  accept: (p: Prepared) => boolean = () => true,
): Promise<{ cases: { index: number; p: Prepared }[]; generated: number; skipped: Map<string, number> }> {
  const raws = fc.sample(arbitraryOf(profile), { seed, numRuns: n * 20 + 50 });
  const cases: { index: number; p: Prepared }[] = [];
  const skipped = new Map<string, number>();
  let generated = 0;
  for (const [index, raw] of raws.entries()) {
    if (cases.length >= n) break;
    generated++;
    const p = await prepare(raw, profile);
    const why =
      'invalid' in p
        ? p.invalid.replace(/(^| )[\w#./@]*\d[\w#./@]*/g, '$1N')
        : accept(p)
          ? null
          : 'not accepted';
    if (why === null) cases.push({ index, p: p as Prepared });
    else skipped.set(why, (skipped.get(why) ?? 0) + 1);
  }
  return { cases, generated, skipped };
}

export async function runCase(env: DurableEnv, index: number, p: Prepared, o: DiffOptions): Promise<CaseRun> {
  const t = Date.now();
  const fault = o.fault?.(p) ?? undefined;
  const durable = await runDurable(env, p.c, p.plain, { mutation: o.mutation, fault });
  return { index, p, durable, divergences: compare(p.plain, durable), ms: Date.now() - t };
}

export async function runDifferential(env: DurableEnv, o: DiffOptions): Promise<DiffReport> {
  const t0 = Date.now();
  const { cases, generated, skipped } = await comparableCases(o.seed, o.cases, o.profile, o.accept);
  const runs: CaseRun[] = [];
  let next = 0;
  const lane = async () => {
    while (next < cases.length) {
      const { index, p } = cases[next++];
      const r = await runCase(env, index, p, o);
      runs.push(r);
      o.log?.(
        `case ${runs.length}/${cases.length} (#${index}): ${r.divergences.length ? `DIVERGES: ${r.divergences[0]}` : 'agrees'} in ${r.ms} ms${r.durable.notes.length ? ` [${r.durable.notes.join('; ')}]` : ''}`,
      );
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, o.concurrency) }, lane));
  runs.sort((a, b) => a.index - b.index);
  const coverage = new Map<string, number>();
  for (const r of runs)
    for (const tag of [
      ...r.p.plain.tags,
      ...r.durable.notes.map((n) => `fault: ${n.split(' ')[0]}`),
      // A try block spanned a park and run() was executed again after it: the execution that parked
      // was checked to have run no catch or finally block there.
      ...(r.durable.blocks.size > 1 && r.p.plain.tags.has('park inside a try block')
        ? ['a try spanned a park: every execution checked']
        : []),
    ])
      coverage.set(tag, (coverage.get(tag) ?? 0) + 1);
  const divergent = runs.filter((r) => r.divergences.length);
  const { shrunk, shrinks } =
    divergent.length && o.shrinkMs > 0 ? await shrink(env, divergent[0], o) : { shrunk: null, shrinks: 0 };
  return {
    seed: o.seed,
    generated,
    skipped,
    runs,
    divergent,
    coverage,
    shrunk,
    shrinks,
    ms: Date.now() - t0,
  };
}

/** fast-check's shrinking from the divergent case's path, one durable case at a time. */
async function shrink(
  env: DurableEnv,
  first: CaseRun,
  o: DiffOptions,
): Promise<{ shrunk: CaseRun | null; shrinks: number }> {
  let last: CaseRun = first;
  let tries = 0;
  const property = fc.asyncProperty(arbitraryOf(o.profile), async (raw: DiffCase) => {
    const p = await prepare(raw, o.profile);
    fc.pre(!('invalid' in p) && (o.accept?.(p) ?? true));
    const r = await runCase(env, first.index, p as Prepared, o);
    tries++;
    if (r.divergences.length) last = r;
    o.log?.(`  shrink ${tries}: ${r.divergences.length ? 'diverges' : 'agrees'}: ${describeCase(r.p.c)}`);
    return r.divergences.length === 0;
  });
  const details = await fc.check(property, {
    seed: o.seed,
    path: String(first.index),
    numRuns: first.index + 1,
    interruptAfterTimeLimit: o.shrinkMs,
    markInterruptAsFailure: false,
  });
  return { shrunk: details.failed || last !== first ? last : null, shrinks: details.numShrinks };
}
