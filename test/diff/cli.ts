/**
 * `npm run chaos:diff -- --cases N --seed S [--concurrency C] [--faults] [--power] [--mutation M]
 *   [--shrink-s T] [--durable-per-mutation K]`
 * The differential test (issue 35 E), long profile: generated programs run as plain JavaScript on a
 * virtual clock and durably on the real engine (PostgreSQL: DATABASE_URL or 127.0.0.1:5432), compared.
 * - default: two workers in this process (real timers), C cases at a time;
 * - `--faults`: two worker processes, one SIGKILLed mid-step in every case with a kill window, the other
 *   taking over (one case at a time: a kill hits every run its worker holds);
 * - `--mutation M`: every durable run with that mutation (race-as-all, sleep-skip, any-as-race);
 * - `--power`: the mutation table (observable / caught per mutation) over the same cases;
 * - `--case JSON [--repeat R]`: one case (as a report prints it), R times;
 * - `--no-kill` (with --faults): the worker processes, no kill (is it the kill or the processes?).
 * Prints the report; exits 1 on a divergence (without --mutation / --power), with the shrunk case.
 * The engine's replay check is on, as in the e2e tests (`DURABLE_REPLAY_CHECK`; `=off` turns it off): each
 * run is replayed from its record after each attempt, and those executions of run() report their catch
 * and finally blocks too; a replay that diverged from its record fails the run of the CLI.
 */
import 'reflect-metadata';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { killFault, killWindow } from './faults';
import { formatPower, mutationPower } from './power';
import { prepare, type Prepared } from './cases';
import { runCase, runDifferential, type DiffOptions } from './property';
import { FAULTS, MUTATIONS, SHORT, type DiffCase, type Mutation } from './program';
import { describeRun, formatReport } from './report';
import { inProcessRig, processRig, type Rig } from './setup';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isFinite(v)) throw new Error(`--${name} must be a number, got ${process.argv[i + 1]}`);
  return v;
}
const flag = (name: string) => process.argv.includes(`--${name}`);

async function main(): Promise<void> {
  const seed = arg('seed', Date.now() % 2 ** 31);
  const faults = flag('faults');
  const mi = process.argv.indexOf('--mutation');
  const mutation = mi < 0 ? undefined : (process.argv[mi + 1] as Mutation);
  if (mutation && !MUTATIONS.includes(mutation))
    throw new Error(`--mutation: one of ${MUTATIONS.join(', ')}`);
  const replayCheck = path.join(tmpdir(), `diff-replay-check-${process.pid}.jsonl`);
  if (process.env.DURABLE_REPLAY_CHECK !== 'off') process.env.DURABLE_REPLAY_CHECK = replayCheck;
  rmSync(replayCheck, { force: true });
  const rig = faults ? await processRig(4) : await inProcessRig();
  let failed = false;
  try {
    failed = await run(rig, seed, faults, mutation);
  } finally {
    await rig.close();
  }
  const replays = existsSync(replayCheck)
    ? readFileSync(replayCheck, 'utf8').split('\n').filter(Boolean)
    : [];
  if (replays.length) {
    console.log(`replay check: ${replays.length} run(s) did not replay from their record:`);
    for (const line of replays.slice(0, 5)) console.log(`  ${line.slice(0, 600)}`);
  }
  process.exit(failed || replays.length ? 1 : 0);
}

/** The run the arguments ask for; true when it found a divergence that fails it. */
async function run(rig: Rig, seed: number, faults: boolean, mutation?: Mutation): Promise<boolean> {
  const log = (line: string) => console.log(`[diff] ${line}`);
  const cases = arg('cases', 40);
  const profile = faults ? FAULTS : SHORT;
  const concurrency = faults ? 1 : arg('concurrency', 4);
  const fault = (p: Prepared) => {
    const w = killWindow(p.plain);
    return w ? killFault(rig, w) : null;
  };
  const o: DiffOptions = {
    cases,
    seed,
    profile,
    concurrency,
    mutation,
    shrinkMs: arg('shrink-s', mutation ? 0 : 300) * 1000,
    fault: faults && !flag('no-kill') ? fault : undefined,
    accept: faults ? (p) => killWindow(p.plain) !== null : undefined,
    log,
  };
  log(`seed ${seed}, ${cases} cases, ${faults ? 'worker processes, a kill per case' : 'in-process workers'}`);
  const ci = process.argv.indexOf('--case');
  if (ci >= 0) {
    // One case (its JSON, as a report prints it), `--repeat R` times.
    const p = await prepare(JSON.parse(process.argv[ci + 1]) as DiffCase, profile);
    if ('invalid' in p) throw new Error(`this case cannot be compared: ${p.invalid}`);
    let diverged = false;
    for (let k = 0; k < arg('repeat', 1); k++) {
      const r = await runCase(rig.env, -1, p, o);
      console.log(describeRun(r));
      diverged ||= r.divergences.length > 0;
    }
    return diverged && !mutation;
  }
  if (flag('power')) {
    const durable = arg('durable-per-mutation', 8);
    console.log(
      formatPower(await mutationPower(rig.env, { seed, cases, profile, concurrency, durable, log })),
    );
    return false;
  }
  const report = await runDifferential(rig.env, o);
  console.log(formatReport(report, mutation ? `differential with mutation ${mutation}` : 'differential'));
  if (!report.divergent.length || mutation) return false;
  console.log(`replay: npm run chaos:diff -- --cases ${cases} --seed ${seed}${faults ? ' --faults' : ''}`);
  return true;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
