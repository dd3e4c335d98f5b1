/**
 * `npm run failover -- --mode synchronous|asynchronous --runs N --lag-ms MS --policy lookup|retry-with-key
 * [--trials T] [--step-delay-ms MS]`: a PostgreSQL failover under a workload (test/failover/failover-run.ts), one line of JSON
 * per trial with what it cost (docs/OPERATIONS.md, "Replication and failover").
 */
import 'reflect-metadata';
import { runFailover } from './failover-run';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? fallback : process.argv[i + 1];
}

async function main(): Promise<void> {
  const mode = arg('mode', 'asynchronous');
  if (mode !== 'synchronous' && mode !== 'asynchronous')
    throw new Error(`--mode must be synchronous or asynchronous, got ${mode}`);
  const policy = arg('policy', 'lookup');
  if (policy !== 'lookup' && policy !== 'retry-with-key')
    throw new Error(`--policy must be lookup or retry-with-key, got ${policy}`);
  const runs = Number(arg('runs', '300'));
  const lagMs = Number(arg('lag-ms', '2000'));
  const trials = Number(arg('trials', '1'));
  const stepDelayMs = Number(arg('step-delay-ms', '20'));
  for (const [name, v] of Object.entries({ runs, lagMs, trials }))
    if (!Number.isInteger(v) || v < 1) throw new Error(`--${name} must be a whole number >= 1`);
  for (let t = 0; t < trials; t++) {
    const result = await runFailover({
      mode,
      runs,
      lagMs,
      policy,
      stepDelayMs,
      log: (l) => console.error(`[failover] ${l}`),
    });
    console.log(JSON.stringify({ ...result, policy }));
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
