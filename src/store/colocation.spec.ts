import {
  classificationProblems,
  exceptionProblems,
  perRunProblems,
  triggerProblems,
} from '../../test/colocation/check';
import { EXCEPTIONS, FUNCTIONS, PER_RUN } from '../../test/colocation/classification';
import { schemaCode } from '../../test/colocation/migration-functions';
import { storeStatements } from '../../test/colocation/store-statements';

/**
 * docs/SCALE-OUT.md, held to the code: on Citus every run table is distributed by the run and
 * co-located, so a statement that stays inside one run stays inside one shard. This check reads the
 * statements src/store defines and sends (as the code is when it runs, not a copy), requires each to be
 * classified, and holds every per-run statement to ONE run: each reference to a run table pinned to the
 * same run id (a parameter, or a CTE/join on it), no other distributed table touched outside the CTEs
 * its entry names. Cross-run statements are exceptions by design, each with its reason
 * (test/colocation/classification.ts). A statement added to src/store and classified nowhere fails.
 */
describe('co-location of the run tables (docs/SCALE-OUT.md)', () => {
  // Jest's require: the store's modules compile through ts-jest, as the code is now.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const store = storeStatements((id) => require(id));

  it('classifies every statement src/store defines or sends', () => {
    expect(store.constants.size).toBeGreaterThan(50);
    expect(store.sent.size).toBeGreaterThan(50);
    expect(classificationProblems(store)).toEqual([]);
  });

  it('keeps every per-run statement inside one run (one shard)', () => {
    const problems = Object.entries(PER_RUN).flatMap(([id, entry]) =>
      perRunProblems(store.texts.get(id) ?? '', entry).map((p) => `${id}: ${p}`),
    );
    expect(problems).toEqual([]);
  });

  it('lists as exceptions only statements that are what the exception says', () => {
    expect(exceptionProblems(store)).toEqual([]);
  });

  it('holds the trigger functions to the row they fire on, and classifies every function', async () => {
    const code = await schemaCode();
    expect([...code.functions.keys()].sort()).toEqual(Object.keys(FUNCTIONS).sort());
    for (const t of code.triggers.values()) expect(FUNCTIONS[t.fn]).toBeDefined();
    for (const [name, f] of Object.entries(FUNCTIONS)) {
      const problems = triggerProblems(code.functions.get(name)!);
      if ('perRun' in f) expect(problems).toEqual([]);
      else expect(problems.length).toBeGreaterThan(0); // cross-run by design: the exception still holds
    }
  });

  describe('fails on what it must refuse (the check checked)', () => {
    const step = (): string => store.texts.get('src/store/run-state/step-write.ts#STEP_WRITE_SQL')!;

    it('a cross-run join added to the live step commit', () => {
      const sql = step();
      expect(perRunProblems(sql)).toEqual([]);
      // The event insert joined to another run (the parent) of the run it writes.
      const bad = sql.replace(
        /select cancel_requested from run\s*$/,
        'select o.cancel_requested_at from run join ai_runs o on o.id = run.parent_id',
      );
      expect(bad).not.toEqual(sql);
      expect(perRunProblems(bad).join('\n')).toMatch(/ai_runs is not pinned to one run/);
    });

    it('a second run in the same statement, and a statement pinned to nothing', () => {
      const two =
        'select * from ai_events where run_id = $1 union all select * from ai_events where run_id = $2';
      expect(perRunProblems(two).join('\n')).toMatch(/another run than the statement's/);
      expect(perRunProblems('select * from ai_runs where id = any($1::uuid[])').join('\n')).toMatch(
        /many runs/,
      );
      expect(perRunProblems('update ai_signals set consumed_at = now() where id = $2').join('\n')).toMatch(
        /not pinned/,
      );
      const child = `with run as (update ai_runs set updated_at = now() where id = $1 returning id)
        insert into ai_events (run_id, event_type) select r.id, 'x' from ai_runs r, run where r.parent_id = run.id`;
      expect(perRunProblems(child).join('\n')).toMatch(/not pinned/);
      expect(perRunProblems('insert into ai_slots (scope, n) values ($1, 1)').join('\n')).toMatch(
        /distributed by scope/,
      );
      expect(perRunProblems('select * from ai_new_table where run_id = $1').join('\n')).toMatch(
        /unknown table/,
      );
    });

    it('accepts joins that stay on the same run', () => {
      const chain = 'select c.* from ai_checkpoints c join ai_runs r on r.id = c.run_id where r.id = $1';
      expect(perRunProblems(chain)).toEqual([]);
      const wrong =
        'select c.* from ai_checkpoints c join ai_runs r on r.parent_id = c.run_id where r.id = $1';
      expect(perRunProblems(wrong).join('\n')).toMatch(/ai_checkpoints is not pinned/);
    });

    it('a new statement nobody classified', () => {
      const extra = {
        ...store,
        constants: new Set([...store.constants, 'src/store/run-state/new.ts#NEW_SQL']),
      };
      expect(classificationProblems(extra).join('\n')).toMatch(/NEW_SQL .* is not classified/);
      expect(Object.keys(EXCEPTIONS).length + Object.keys(PER_RUN).length).toBeGreaterThan(90);
    });
  });
});
