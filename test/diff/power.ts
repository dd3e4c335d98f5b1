/**
 * The power check: the durable interpreter made wrong on purpose (a test-only `mutation` of its input:
 * `race` as `all`-then-first, a sleep that ignores its timer, `any` as `race`), compared with the plain
 * run of the right program. For each mutation: in how many comparable cases the mutation changes what
 * the plain run observes (plain against mutated plain, no engine), and of the cases run durably with it,
 * how many the differential check reports as divergent; `strict` counts only cases whose unmutated
 * durable run agreed (so the catch is the mutation's, not an engine defect's).
 */
import { calledLabels, canonical, type DurableEnv } from './harness';
import { runPlain, type PlainResult } from './plain';
import { comparableCases, runCase, type CaseRun } from './property';
import { MUTATIONS, type Mutation, type Profile } from './program';

export interface MutationPower {
  mutation: Mutation;
  /** Comparable cases in which the mutation changes the plain run's outcome or effects. */
  observable: number;
  tried: number;
  caught: number;
  strict: number;
  example: CaseRun | null;
}

export interface PowerReport {
  cases: number;
  mutations: MutationPower[];
}

export async function mutationPower(
  env: DurableEnv,
  o: {
    seed: number;
    cases: number;
    profile: Profile;
    concurrency: number;
    /** Durable runs per mutation, at most. */
    durable: number;
    log?: (line: string) => void;
  },
): Promise<PowerReport> {
  const { cases } = await comparableCases(o.seed, o.cases, o.profile);
  const picked = new Map<Mutation, typeof cases>();
  const out: MutationPower[] = [];
  for (const mutation of MUTATIONS) {
    const seen: typeof cases = [];
    const hangs: typeof cases = [];
    for (const x of cases) {
      // Hung steps' timeouts are decorators' for UNIT_MS units (hang-steps.ts): not with other units.
      if (JSON.stringify(x.p.c.ops).includes('"hang"')) continue;
      const m = await runPlain(x.p.c, mutation, o.profile.maxUnits * 3);
      const same = canonical(observed(m)) === canonical(observed(x.p.plain));
      if (same) continue;
      // A mutant that never returns costs a whole case timeout durably: those last.
      (m.invalid?.startsWith('run() never returns') ? hangs : seen).push(x);
    }
    picked.set(mutation, [...seen, ...hangs].slice(0, o.durable));
    out.push({
      mutation,
      observable: seen.length + hangs.length,
      tried: 0,
      caught: 0,
      strict: 0,
      example: null,
    });
  }
  const baseline = new Map<number, CaseRun>();
  const all = [...new Map([...picked.values()].flat().map((x) => [x.index, x])).values()];
  await pool(o.concurrency, all, async (x) => {
    baseline.set(x.index, await runCase(env, x.index, x.p, { ...o, shrinkMs: 0 }));
  });
  for (const m of out) {
    await pool(o.concurrency, picked.get(m.mutation)!, async (x) => {
      const r = await runCase(env, x.index, x.p, { ...o, shrinkMs: 0, mutation: m.mutation });
      m.tried++;
      if (!r.divergences.length) return;
      m.caught++;
      if (!baseline.get(x.index)!.divergences.length) {
        m.strict++;
        m.example ??= r;
      }
      o.log?.(`  ${m.mutation} caught by case #${x.index}: ${r.divergences[0]}`);
    });
  }
  return { cases: cases.length, mutations: out };
}

/** What the durable run is compared on (a cancelled run has no output). */
const observed = (p: PlainResult) => ({
  status: p.status,
  outcome: p.status === 'succeeded' ? p.outcome : null,
  effects: p.effects,
  calls: calledLabels(p.calls.keys()),
});

async function pool<T>(n: number, items: T[], f: (x: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < items.length) await f(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.max(1, n) }, lane));
}

export function formatPower(r: PowerReport): string {
  return [
    `mutations (the durable interpreter deliberately wrong; ${r.cases} comparable cases):`,
    ...r.mutations.map(
      (m) =>
        `  ${m.mutation.padEnd(12)} observable in ${m.observable}/${r.cases} (plain vs mutated plain); durably caught ${m.caught}/${m.tried}, ${m.strict} where the unmutated run agreed`,
    ),
  ].join('\n');
}
