/**
 * `npm run chaos -- --runs N --kills K --pg-restarts R --stalls S --terminates T --seed X --workers W`
 * Prints the summary table, writes chaos-report.json, exits 1 when an invariant broke.
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { runChaos } from './harness';
import { formatReport } from './report';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isFinite(v) || v < 0)
    throw new Error(`--${name} must be a number >= 0, got ${process.argv[i + 1]}`);
  return v;
}

async function main(): Promise<void> {
  const runs = arg('runs', 200);
  const options = {
    runs,
    kills: arg('kills', 20),
    stalls: arg('stalls', 2),
    pgRestarts: arg('pg-restarts', 1),
    terminates: arg('terminates', 2),
    seed: arg('seed', 1),
    workers: arg('workers', 4),
    windowMs: arg('window-ms', Math.max(15_000, runs * 60)),
  };
  const report = await runChaos(options, (line) => console.log(`[chaos] ${line}`));
  console.log(`\n${formatReport(report)}`);
  writeFileSync('chaos-report.json', JSON.stringify(report, null, 2));
  console.log('\nwritten: chaos-report.json');
  process.exit(report.ok ? 0 : 1);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
