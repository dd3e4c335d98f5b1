/**
 * The property: for every generated case (programs, outside actions, faults), after the harness
 * drove it to rest, no invariant is broken. Seeded; fast-check shrinks a failing case.
 */
import fc from 'fast-check';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { runCase } from './harness';
import { RULES, ruleOf } from './grammar';
import { Case, caseArbitrary } from './program';

export interface ModelOptions {
  cases: number;
  seed: number;
  /** Stop starting new cases after this long (fast-check's interruptAfterTimeLimit). */
  timeLimitMs?: number;
  /** Shrinking steps at most (each one replays a case). */
  maxShrinks?: number;
  log?: (line: string) => void;
  /** Count only violations matching this (to hunt one defect; its shrunk case keeps showing it). */
  only?: RegExp;
  /** Replay one case: the `path` a failing run printed (with its seed). */
  path?: string;
  /**
   * Every case with a real lost WAL suffix (a primary and a standby of its own, promoted behind the
   * primary mid-case): about 3 s more per case.
   */
  lostSuffix?: boolean;
}

export interface ModelReport {
  seed: number;
  casesRun: number;
  failed: boolean;
  interrupted: boolean;
  counterexample: Case | null;
  violations: string[];
  path?: string;
  ms: number;
  /** Per grammar rule, over every case run: ops entered live, and ops replayed by a later epoch. */
  coverage: Map<string, { ran: number; replayed: number }>;
}

/** The coverage table: one line per rule, with how often it ran live and was then replayed. */
export function coverageTable(coverage: ModelReport['coverage']): string {
  const width = Math.max(...[...coverage.keys()].map((k) => k.length));
  return [...coverage]
    .map(([rule, c]) =>
      rule.startsWith('fault:')
        ? `  ${rule.padEnd(width)}  fired ${String(c.ran).padStart(4)}`
        : `  ${rule.padEnd(width)}  ran ${String(c.ran).padStart(6)}  replayed after a takeover ${String(c.replayed).padStart(6)}${c.replayed ? '' : '  <- never replayed'}`,
    )
    .join('\n');
}

export async function runModel(o: ModelOptions): Promise<ModelReport> {
  // One database for the whole run, a schema of its own per case in it (createTestSchema): no database
  // is created and dropped (a forced checkpoint) per case.
  const host = await createTestDatabase('model');
  try {
    return await runModelOn(host, o);
  } finally {
    await host.drop().catch(() => undefined);
  }
}

async function runModelOn(host: TestDatabase, o: ModelOptions): Promise<ModelReport> {
  const t0 = Date.now();
  let casesRun = 0;
  let lastViolations: string[] = [];
  const coverage: ModelReport['coverage'] = new Map(RULES.map((r) => [r, { ran: 0, replayed: 0 }]));
  const property = fc.asyncProperty(caseArbitrary(o.lostSuffix), async (c) => {
    casesRun++;
    const r = await runCase(c, host);
    for (const [rule, x] of r.coverage) {
      const sum = coverage.get(rule) ?? { ran: 0, replayed: 0 };
      coverage.set(rule, { ran: sum.ran + x.ran, replayed: sum.replayed + x.replayed });
    }
    if (o.only) r.violations = r.violations.filter((v) => o.only!.test(v));
    if (r.violations.length) {
      lastViolations = r.violations;
      o.log?.(`  case ${casesRun}: ${r.violations.length} violation(s) in ${r.ms} ms: ${r.violations[0]}`);
    } else {
      const how = (x: (typeof r.runs)[number]) =>
        `${x.status}${x.error ? ` ${(x.error as { code?: string }).code ?? (x.error as { message?: string }).message}` : ''}`;
      o.log?.(`  case ${casesRun}: ok in ${r.ms} ms (${r.runs.map(how).join(', ')})`);
    }
    return r.violations.length === 0;
  });
  const details = await fc.check(property, {
    numRuns: o.cases,
    seed: o.seed,
    interruptAfterTimeLimit: o.timeLimitMs,
    markInterruptAsFailure: false,
    endOnFailure: o.maxShrinks === 0,
    ...(o.path ? { path: o.path } : {}),
  });
  const counterexample = details.counterexample ? details.counterexample[0] : null;
  if (counterexample) {
    // Replay the shrunk case once more, for its violations (the last run is not always the shrunk one).
    const again = (await runCase(counterexample, host)).violations.filter((v) => !o.only || o.only.test(v));
    if (again.length) lastViolations = again;
  }
  return {
    seed: o.seed,
    casesRun,
    failed: details.failed,
    interrupted: details.interrupted,
    counterexample,
    violations: details.failed ? lastViolations : [],
    path: details.counterexamplePath ?? undefined,
    ms: Date.now() - t0,
    coverage,
  };
}

/** A counterexample in a few lines: programs, actions, faults. */
export function describeCase(c: Case): string {
  const op = (o: Case['programs'][number]['ops'][number]): string => {
    if (!['step', 'cmd', 'fan', 'wait', 'sleep', 'clock'].includes(o.t))
      return `${o.id}:${ruleOf(o)} ${JSON.stringify({ ...o, id: undefined, t: undefined })}`;
    if (o.t === 'step') return `${o.id}:step(${o.kind}${o.nul !== 'none' ? `,NUL in ${o.nul}` : ''})`;
    if (o.t === 'cmd')
      return `${o.id}:${o.cmd}${o.approval ? `[${o.decision}]` : ''}${o.keyed ? '(own key)' : ''}`;
    if (o.t === 'fan')
      return `${o.id}:all(${o.branches.map((b) => `${b.kind}→${b.cmd}${b.approval ? `[${b.decision}]` : ''}${b.keyed ? '(own key)' : ''}`).join(' | ')})`;
    if (o.t === 'wait') return `${o.id}:wait(${o.timeoutMs ?? '∞'})`;
    if (o.t === 'sleep') return `${o.id}:sleep(${o.ms})`;
    return `${o.id}:now+uuid`;
  };
  return [
    ...(c.limited
      ? [`  kind with limits (2 at once, 1 per key${c.hold ? ', slots held while waiting' : ''})`]
      : []),
    ...(c.deployAt !== undefined
      ? [`  the code with ctx.patched deployed ${c.deployAt === null ? 'never' : `at round ${c.deployAt}`}`]
      : []),
    ...(c.scheduled
      ? [`  program #0 started by a per-second schedule (overlap ${c.scheduled.overlap})`]
      : []),
    ...c.programs.map((p, i) => `  run#${i}${p.key ? ` [key ${p.key}]` : ''}: ${p.ops.map(op).join(' ; ')}`),
    ...c.actions.map(
      (a) => `  action run#${a.run} ${JSON.stringify(a.action)} at ${JSON.stringify(a.moment)}`,
    ),
    ...c.faults.map(
      (f, i) =>
        `  fault#${i} ${f.kind} at ${f.where} (hit ${f.nth + 1})${f.kind === 'zombie' ? `, wakes at ${f.release}` : ''}${f.kind === 'hold' ? ` for ${f.holdMs} ms` : ''}${f.kind === 'lost-suffix' ? `, the primary commits ${f.holdMs} ms more` : ''}`,
    ),
  ].join('\n');
}
