import { storeStatements } from '../../test/colocation/store-statements';

/**
 * Every statement of src/store that creates a run names `record_format` (with RECORD_FORMAT, src/store/record-format.ts): a
 * run created without it would take the column's default (1), the format of the first release that
 * had the column, however new its records (test/e2e/record-format checks the value each path writes).
 */
describe('the record format every new run gets', () => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const store = storeStatements((id) => require(id));

  it('every insert into ai_runs names record_format', () => {
    const inserts = [...store.texts].flatMap(([id, text]) =>
      [...text.matchAll(/insert into ai_runs(?: as \w+)?\s*\(([^)]*)\)/g)].map((m) => ({
        id,
        columns: m[1],
      })),
    );
    expect(inserts.length).toBeGreaterThanOrEqual(4);
    const without = inserts.filter((i) => !/\brecord_format\b/.test(i.columns)).map((i) => i.id);
    expect(without).toEqual([]);
  });
});
