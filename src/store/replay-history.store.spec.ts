import { durableNames } from './durable-names';
import type { SqlText } from './durable-names';
import { readRunHistory } from './replay-history.store';

/**
 * The replay check reads a run's record between two reads of its row, and reads again when the row
 * moved. Found by the chaos suite and the model test (a succeeded run's replay "asked for a command past
 * the end of the record", whose history held that command): a command's outcome and the run's finish
 * committed in one millisecond, updated_at (read to the millisecond) looked unchanged, and the record
 * read between them was checked as the succeeded run's.
 */
describe('readRunHistory', () => {
  const names = durableNames();
  const sameMs = new Date('2026-12-01T16:52:02.927Z');
  const row = (status: string, version: string) => ({
    id: 'r1',
    kind: 'agent',
    status,
    input: {},
    output: status === 'succeeded' ? { ok: 1 } : null,
    error: null,
    cursor: { step: 7 },
    epoch: 3,
    max_attempts: 5,
    updated_at: sameMs, // one millisecond for both writes
    version,
    db_now: sameMs,
  });
  const checkpoint = (i: number) => ({
    source: 'checkpoint',
    step_index: i,
    name: `step${i}`,
    output: i,
    seq: i,
    fingerprint: null,
    failed: false,
  });

  it('reads again when the row moved between its two reads, though updated_at is the same millisecond', async () => {
    const runReads = [
      row('running', '100'),
      row('succeeded', '101'),
      row('succeeded', '101'),
      row('succeeded', '101'),
    ];
    const recordReads = [[checkpoint(6)], [checkpoint(6), checkpoint(7)]];
    const query = async (sql: SqlText) => {
      const text = sql(names);
      if (text.includes('union all')) return { rows: recordReads.shift()! };
      return { rows: [runReads.shift()!] };
    };
    const history = (await readRunHistory(query, 'r1'))!;
    expect(history.run.status).toBe('succeeded');
    expect(history.checkpoints.map((c) => c.index)).toEqual([6, 7]);
  });
});
