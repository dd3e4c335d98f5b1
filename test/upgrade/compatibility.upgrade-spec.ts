import type { QueryRunner } from 'typeorm';
import { serverUrl } from '../helpers/database';
import { Baseline, checkCompatibility, dropDatabase, prepareBaseline } from './compatibility';
import { previousRelease, PREVIOUS_RELEASE } from './previous-release';

/**
 * The compatibility rule (docs/UPGRADING.md): this release's migrations, applied to the previous
 * release's schema while its workers run, keep every statement it sends preparing with the columns it
 * reads, accept the rows it writes, and say which of them lock a table for a time that grows with it.
 * Then the check checked: migrations that break each part of the rule, added after this release's own.
 */
describe(`upgrading from ${PREVIOUS_RELEASE.version}: the compatibility check`, () => {
  const server = serverUrl();
  let base: Baseline;

  beforeAll(async () => {
    base = await prepareBaseline(server, `dx_upgrade_base_${process.pid}`, previousRelease());
  }, 120_000);
  afterAll(() => base && dropDatabase(server, base.template));

  /** A migration class for a test: `sql` in order, in a transaction unless `transaction` is false. */
  const migration = (name: string, sql: string[], transaction?: false) =>
    class {
      name = name;
      transaction = transaction;
      async up(q: QueryRunner) {
        for (const s of sql) await q.query(s);
      }
      async down() {}
    };

  it("this release's migrations keep the previous release's statements, writes and declared locks", async () => {
    const r = await checkCompatibility(server, base);
    expect(r.problems).toEqual([]);
    expect(r.checked).toBeGreaterThan(60);
    expect(r.effects.length).toBeGreaterThan(20);
    // The statements 0.2.0 prepares by name that return ai_runs.*: they get 0A000 after the migrations.
    expect(r.widened).toEqual(
      expect.arrayContaining([
        'src/store/run-control.store.ts#START_RUN_SQL',
        'src/store/run-control.store.ts#RUN_BY_KEY_SQL',
        'src/store/run-reads.store.ts#GET_RUN_SQL',
      ]),
    );
  }, 60_000);

  it('fails a migration that drops or renames what the previous release reads or writes', async () => {
    const r = await checkCompatibility(server, base, {
      extra: [
        migration('DropCancelReason1799999999001', [
          'alter table ai_runs drop column cancel_reason',
          'alter table ai_signals rename column payload to body',
        ]),
      ],
    });
    expect(r.problems).toEqual(
      expect.arrayContaining([
        'ai_runs.cancel_reason was dropped or renamed (the previous release uses it)',
        'ai_signals.payload was dropped or renamed (the previous release uses it)',
        expect.stringMatching(
          /^src\/store\/run-control\.store\.ts#CANCEL_RUN_SQL: fails to prepare now: 42703 column .*cancel_reason/,
        ),
        expect.stringMatching(
          /^src\/store\/sql\/signal\.sql\.ts#SEND_SIGNAL_SQL: fails to prepare now: 42703 column "payload"/,
        ),
      ]),
    );
  }, 60_000);

  it('fails a migration that refuses what the previous release writes', async () => {
    const r = await checkCompatibility(server, base, {
      extra: [
        migration('StricterWrites1799999999002', [
          "alter table ai_signals add column region text not null default 'eu'",
          'alter table ai_signals alter column region drop default',
          'alter table ai_commands add constraint ai_commands_name_check check (length(command_name) < 100)',
          'create unique index ai_commands_step_idx on ai_commands (run_id, step_index)',
          "alter table ai_runs add column tenant text check (tenant <> '')",
        ]),
      ],
    });
    const mine = r.problems.filter((p) => !p.startsWith('StricterWrites'));
    expect(mine).toEqual([
      'ai_commands: new constraint ai_commands_name_check (CHECK ((length(command_name) < 100))) constrains what the previous release writes',
      'ai_commands: new unique index ai_commands_step_idx (CREATE UNIQUE INDEX ai_commands_step_idx ON public.ai_commands USING btree (run_id, step_index)) may refuse what the previous release writes',
      'ai_signals.region is new, NOT NULL and has no default: previous-release inserts fail',
    ]);
    // And it locks two tables for a time that grows with them (an index build, CHECKs validated on every
    // row), without saying so; the NOT NULL column with a constant default is catalog only (no problem).
    expect(r.problems.find((p) => p.startsWith('StricterWrites'))).toMatch(
      /^StricterWrites1799999999002 holds ai_commands \(AccessExclusiveLock\), ai_runs \(AccessExclusiveLock\) for work that grows/,
    );
  }, 60_000);

  it('fails an index built under a lock on a previous-release table, and takes one built CONCURRENTLY', async () => {
    const locked = migration('EventTypeIndex1799999999003', [
      'create index ai_events_type_idx on ai_events (event_type)',
    ]);
    const r = await checkCompatibility(server, base, { extra: [locked] });
    expect(r.problems).toEqual([
      expect.stringMatching(
        /^EventTypeIndex1799999999003 holds ai_events \(ShareLock\) for work that grows with the table .*ai_events_legacy_event_type_idx/,
      ),
    ]);
    const concurrent = migration(
      'EventTypeIndex1799999999004',
      ['create index concurrently ai_signals_name_idx on ai_signals (name)'],
      false,
    );
    expect((await checkCompatibility(server, base, { extra: [concurrent] })).problems).toEqual([]);
  }, 60_000);
});
