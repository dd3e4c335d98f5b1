import { existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * The replay check on every run of every e2e test (issue 19): every worker of this jest process and
 * of the processes its tests start (they inherit the variable) replays each run after each attempt
 * against its stored record and reports a divergence to this file; the test during which one was
 * reported fails with it. `DURABLE_REPLAY_CHECK=off` turns it off for a local run.
 */
const file = path.join(
  tmpdir(),
  `durable-replay-check-${process.pid}-${process.env.JEST_WORKER_ID ?? 0}.jsonl`,
);
if (process.env.DURABLE_REPLAY_CHECK !== 'off') {
  rmSync(file, { force: true });
  process.env.DURABLE_REPLAY_CHECK = file;
}
let seen = 0;

function newFailures(): string[] {
  if (process.env.DURABLE_REPLAY_CHECK !== file || !existsSync(file)) return [];
  const lines = readFileSync(file, 'utf8').split('\n').filter(Boolean);
  const fresh = lines.slice(seen);
  seen = lines.length;
  return fresh;
}

afterEach(() => {
  const failures = newFailures();
  if (failures.length)
    throw new Error(`replay check: ${failures.length} run(s) did not replay:\n${failures.join('\n')}`);
});

afterAll(() => {
  const failures = newFailures();
  if (failures.length)
    throw new Error(`replay check: ${failures.length} run(s) did not replay:\n${failures.join('\n')}`);
});
