import 'reflect-metadata';
import { createTestDatabase } from '../helpers/database';
import { runCase } from '../model/harness';
import type { Case } from '../model/program';
import { coverageTable, describeCase, runModel } from '../model/property';

/**
 * The model-based property (test/model/): generated programs of the model workflow, outside actions
 * at generated moments and faults at pause points (holds, zombies past their lease, crashes) against
 * three worker apps on one database; after each case, the invariant checker. Fixed seed; a short
 * profile (`npm run chaos:model -- --cases N --seed S [--lost-suffix]` runs more).
 */
describe('model-based property (fast-check)', () => {
  it('no generated case breaks an invariant (seed 424242)', async () => {
    const report = await runModel({ cases: 40, seed: 424242, timeLimitMs: 75_000 });
    const details = report.counterexample
      ? `seed ${report.seed}, path ${report.path}\n${report.violations.join('\n')}\n${describeCase(report.counterexample)}`
      : '';
    console.log(
      `model: ${report.casesRun} cases; coverage per grammar rule:\n${coverageTable(report.coverage)}`,
    );
    expect(details).toBe('');
    expect(report.casesRun).toBeGreaterThan(0);
  }, 115_000);

  it('no case with a real lost WAL suffix breaks an invariant (seed 2323)', async () => {
    // Each case on a primary and a standby of its own; mid-case the standby is promoted behind the
    // primary (test/model/lost-suffix.ts) and the invariants allow what async replication loses only.
    const report = await runModel({ cases: 8, seed: 2323, timeLimitMs: 70_000, lostSuffix: true });
    const details = report.counterexample
      ? `seed ${report.seed}, path ${report.path}\n${report.violations.join('\n')}\n${describeCase(report.counterexample)}`
      : '';
    const lost = new Map([...report.coverage].filter(([rule]) => rule.startsWith('fault: lost-suffix')));
    console.log(`model (lost suffix): ${report.casesRun} cases\n${coverageTable(lost)}`);
    expect(details).toBe('');
    expect(lost.get('fault: lost-suffix')?.ran).toBeGreaterThan(0);
    expect(lost.get('fault: lost-suffix (events the new primary lacked)')?.ran).toBeGreaterThan(0);
  }, 130_000);

  it('a zombie woken inside a command body, before its request, charges nothing (and does without the fenced transport)', async () => {
    // Three runs, each one command at a target that does not deduplicate keys (plain_lookup). Each run's
    // first claim freezes inside the command body, past the engine's last lease check; another worker
    // takes the run over, looks the key up (not found) and sends; the zombie wakes once all settled.
    const one = { cmd: 'plain_lookup', approval: false, decision: 'approve', resolution: 'retry' } as const;
    const c: Case = {
      programs: [0, 1, 2].map(() => ({ ops: [{ t: 'cmd', id: 'o0', ...one }] })),
      actions: [],
      faults: [0, 1, 2].map(() => ({
        where: 'in-body:command:',
        nth: 0,
        kind: 'zombie',
        holdMs: 10,
        release: 'settled',
      })),
    };
    const host = await createTestDatabase('model_in_body');
    try {
      const on = await runCase(c, host);
      const off = await runCase({ ...c, fencedTransport: false }, host);
      console.log(
        `in-body zombies: transport on ${on.violations.length} violation(s), off ${off.violations.length}:\n${off.violations.join('\n')}`,
      );
      expect(on.violations).toEqual([]);
      expect(on.runs.map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
      // The test's power: with the transport off the woken zombies charge their keys again.
      expect(off.violations.join('\n')).toMatch(/plain target applied run#\d op o0 .* 2 times/);
    } finally {
      await host.drop();
    }
  }, 120_000);
});
