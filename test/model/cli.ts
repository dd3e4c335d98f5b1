/**
 * `npm run chaos:model -- --cases N --seed S [--time-limit-s T] [--no-shrink] [--only REGEX] [--path P]
 *   [--lost-suffix]`
 * `npm run chaos:model -- --differential [chaos:diff's options]`: the differential test against plain
 * JavaScript, long (test/diff/README.md).
 * Runs the model-based property (PostgreSQL: DATABASE_URL or 127.0.0.1:5432), prints every case, and
 * on a violation the shrunk counterexample with its seed; exits 1 then. `DURABLE_MODEL_LIMITED=1`: every
 * case runs the kind with concurrency limits. `--lost-suffix`: every case on a primary and a standby of
 * its own, with a real asynchronous failover that loses the primary's last commits (program.ts).
 */
import 'reflect-metadata';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

// The replay check on every run of every case (each worker replays a run after each attempt).
const checkFile =
  process.env.DURABLE_REPLAY_CHECK ?? path.join(tmpdir(), `durable-model-replay-${process.pid}.jsonl`);
if (!process.env.DURABLE_REPLAY_CHECK) rmSync(checkFile, { force: true });
process.env.DURABLE_REPLAY_CHECK = checkFile;
const replayCheckFailures = (): string[] =>
  existsSync(checkFile) ? readFileSync(checkFile, 'utf8').split('\n').filter(Boolean) : [];
import { coverageTable, describeCase, runModel } from './property';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isFinite(v)) throw new Error(`--${name} must be a number, got ${process.argv[i + 1]}`);
  return v;
}

/** `--only REGEX`: count only violations matching it (hunt one defect at a time). */
function onlyArg(): RegExp | undefined {
  const i = process.argv.indexOf('--only');
  return i < 0 ? undefined : new RegExp(process.argv[i + 1]);
}

async function main(): Promise<void> {
  const seed = arg('seed', Date.now() % 2 ** 31);
  const cases = arg('cases', 30);
  const log = (line: string) => console.log(`[model] ${line}`);
  log(`seed ${seed}, up to ${cases} cases`);
  const r = await runModel({
    cases,
    seed,
    timeLimitMs: arg('time-limit-s', 900) * 1000,
    only: onlyArg(),
    path: process.argv.includes('--path') ? process.argv[process.argv.indexOf('--path') + 1] : undefined,
    maxShrinks: process.argv.includes('--no-shrink') ? 0 : undefined,
    lostSuffix: process.argv.includes('--lost-suffix'),
    log,
  });
  console.log(
    `\ncases run: ${r.casesRun}${r.interrupted ? ' (time limit reached)' : ''}, ${(r.ms / 1000).toFixed(1)} s`,
  );
  console.log(
    `coverage per grammar rule (an op counts as replayed when a later epoch replayed it):\n${coverageTable(r.coverage)}`,
  );
  const failedChecks = replayCheckFailures();
  console.log(`replay check: ${failedChecks.length} run(s) did not replay`);
  for (const f of failedChecks.slice(0, 5)) console.log(`  - ${f}`);
  if (failedChecks.length) process.exit(1);
  if (!r.failed) {
    console.log('violations: 0');
    process.exit(0);
  }
  console.log(`violations: ${r.violations.length} (seed ${r.seed}, path ${r.path})`);
  for (const v of r.violations) console.log(`  - ${v}`);
  console.log(`shrunk counterexample:\n${r.counterexample ? describeCase(r.counterexample) : '(none)'}`);
  console.log(`replay: npm run chaos:model -- --cases ${cases} --seed ${r.seed}`);
  process.exit(1);
}

if (process.argv.includes('--differential')) {
  // The differential test's long profile (test/diff/README.md): the same as `npm run chaos:diff`.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  require('../diff/cli');
} else {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
