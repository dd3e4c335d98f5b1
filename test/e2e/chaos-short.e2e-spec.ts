import { runChaos } from '../chaos/harness';
import { formatReport } from '../chaos/report';

/**
 * The short chaos profile inside `npm test`: 100 agent runs on 4 worker processes and a PostgreSQL of
 * its own, with 10 random SIGKILLs, 10 workers armed at the seven named crash points, 2 zombies
 * (SIGSTOP past the lease), 2 connection cuts and 1 PostgreSQL restart. Every invariant must hold.
 * The long profile is `npm run chaos -- --runs 2000 --kills 200 --stalls 20 --pg-restarts 3`.
 */
describe('chaos (short profile)', () => {
  it('keeps every invariant under kills, crash points, zombies, connection cuts and a PostgreSQL restart', async () => {
    const report = await runChaos({
      runs: 100,
      kills: 20,
      stalls: 2,
      pgRestarts: 1,
      terminates: 2,
      seed: 7,
      workers: 4,
      windowMs: 15_000,
    });
    console.log(formatReport(report));
    expect(report.runs.lost).toBe(0);
    expect(report.runs.succeeded).toBe(100);
    expect(report.commands.duplicateEffects).toBe(0);
    expect(report.invariants.filter((i) => !i.ok)).toEqual([]);
    const fired = Object.keys(report.faults).filter((k) => k.startsWith('crash point fired'));
    expect(fired.length).toBeGreaterThanOrEqual(4); // the armed points really were reached
    expect(report.faults['PostgreSQL restart']).toBe(1);
  }, 240_000);
});
