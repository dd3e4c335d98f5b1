import 'reflect-metadata';
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
});
