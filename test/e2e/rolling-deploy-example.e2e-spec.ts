import { fork } from 'node:child_process';
import path from 'node:path';
import { runRollingDeploy } from '../../examples/rolling-deploy/rolling-deploy';
import { compiledEntry } from '../helpers/compiled';
import { createTestDatabase, TestDatabase } from '../helpers/database';

const POD = path.join(__dirname, '..', '..', 'examples', 'rolling-deploy', 'pod.ts');

/**
 * Issue 22, item 2: the rolling-deploy example (`npm run example:rolling-deploy`), small. Old pods run
 * version 1; orders wait for approval or are in the middle of a step when each old pod is replaced by a
 * new one that registers version 2 (a step inserted before the wait) and keeps version 1, the last old
 * pod SIGKILLed. Every run finishes on its own version's path, none with non-determinism, and the report
 * says which path each took.
 */
describe('the rolling-deploy example', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('rolling_example');
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('finishes every order on its version’s path across a deploy that inserts a step before the wait', async () => {
    const lines: string[] = [];
    const report = await runRollingDeploy({
      databaseUrl: db.url,
      asIs: true,
      orders: 24,
      pods: 2,
      out: (l) => lines.push(l),
      spawnPod: (env) =>
        fork(compiledEntry(POD), [], {
          env: { ...process.env, ...env, FULFIL_MS: '300' },
          stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        }),
    });
    expect(report.runs).toHaveLength(24);
    expect(report.nonDeterminism).toBe(0);
    for (const r of report.runs) {
      expect({ ref: r.ref, status: r.status, path: r.path }).toEqual({
        ref: r.ref,
        status: 'succeeded',
        path: `v${r.version}`,
      });
      const user = r.steps.filter((s) => !s.startsWith('$'));
      expect(user).toEqual(r.version === 1 ? ['triage', 'fulfil'] : ['triage', 'fraud_check', 'fulfil']);
    }
    const v1 = report.runs.filter((r) => r.version === 1);
    const v2 = report.runs.filter((r) => r.version === 2);
    expect(v1.length).toBeGreaterThan(0);
    expect(v2.length).toBeGreaterThan(0);
    // Version-1 runs crossed the deploy (an old pod began them, a new one finished them); no v2 run was
    // ever claimed by an old pod.
    expect(report.crossed).toBeGreaterThan(0);
    expect(v2.filter((r) => r.pods.some((p) => p.startsWith('old-')))).toEqual([]);
    expect(report.v1Left).toBe(0);
    expect(report.ok).toBe(true);
    expect(lines.join('\n')).toContain('every run finished on its own version’s path');
    console.log(lines.join('\n'));
  });
});
