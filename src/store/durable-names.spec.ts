import { InvalidArgumentError } from '../errors/invalid-argument.error';
import * as adminRuns from './admin-runs.store';
import * as commands from './command.store';
import { DEFAULT_NAMES, durableNames, SqlText } from './durable-names';
import * as expiredLeases from './expired-leases.store';
import * as retention from './retention.store';
import * as runControl from './run-control.store';
import * as runReads from './run-reads.store';
import * as runStats from './run-stats.reader';
import * as claimRuns from './run-state/claim-runs';
import * as finishRun from './run-state/finish-run';
import * as heartbeat from './run-state/heartbeat';
import * as loadReplay from './run-state/load-replay';
import * as parkRun from './run-state/park-run';
import * as recordCommand from './run-state/record-command';
import * as reserveCommand from './run-state/reserve-command';
import * as stepWrite from './run-state/step-write';
import * as waitForSignal from './run-state/settle-waits';
import * as signal from './sql/signal.sql';
import * as testControls from './test-controls';

/** Every statement of the store that names a table, by its exported name. */
const STATEMENTS: [string, SqlText][] = [
  adminRuns,
  commands,
  expiredLeases,
  retention,
  runControl,
  runReads,
  runStats,
  claimRuns,
  finishRun,
  heartbeat,
  loadReplay,
  parkRun,
  recordCommand,
  reserveCommand,
  stepWrite,
  waitForSignal,
  signal,
  testControls,
].flatMap((m) =>
  Object.entries(m).filter(
    (e): e is [string, SqlText] => e[0].endsWith('_SQL') && typeof e[1] === 'function',
  ),
);

/** The names a schema gives the module's tables, channels, statements and migration lock. */
describe('durableNames', () => {
  it('the default (none, or public) keeps every name as it was: unqualified tables, the same channels, statements and lock', () => {
    for (const names of [DEFAULT_NAMES, durableNames(), durableNames('public')]) {
      expect(names).toMatchObject({
        schema: undefined,
        runs: 'ai_runs',
        checkpoints: 'ai_checkpoints',
        commands: 'ai_commands',
        events: 'ai_events',
        signals: 'ai_signals',
        migrations: 'ai_migrations',
        wakeChannel: 'durable_execution_wake',
        doneChannel: 'durable_execution_done',
        lockKey: '7402113901',
        prefix: '',
      });
      expect(names.statement('dx_claim')).toBe('dx_claim');
      expect(names.label('ai_runs')).toBe('ai_runs');
    }
  });

  it('another schema qualifies every table (quoted) and scopes channels, statement names and the lock', () => {
    const a = durableNames('a');
    expect(a).toMatchObject({
      schema: 'a',
      runs: '"a".ai_runs',
      migrations: '"a".ai_migrations',
      wakeChannel: 'durable_execution_wake_a',
      doneChannel: 'durable_execution_done_a',
      prefix: '"a".',
    });
    expect(a.statement('dx_claim')).toBe('dx_claim@a');
    expect(a.label('ai_runs')).toBe('a.ai_runs');
    const b = durableNames('b');
    expect(new Set([a.lockKey, b.lockKey, DEFAULT_NAMES.lockKey]).size).toBe(3);
    expect(BigInt(a.lockKey)).toBe(BigInt.asIntN(64, BigInt(a.lockKey)));
  });

  it('keeps channel and statement names within 63 bytes (PostgreSQL truncates longer ones), distinct per schema', () => {
    const long1 = `s${'x'.repeat(61)}1`;
    const long2 = `s${'x'.repeat(61)}2`;
    for (const [x, y] of [[durableNames(long1), durableNames(long2)]]) {
      for (const pick of [
        (n: typeof x) => n.wakeChannel,
        (n: typeof x) => n.doneChannel,
        (n: typeof x) => n.statement('dx_reserve_command'),
      ]) {
        expect(Buffer.byteLength(pick(x))).toBeLessThanOrEqual(63);
        expect(pick(x)).not.toBe(pick(y));
      }
    }
    expect(durableNames(long1).wakeChannel).toMatch(/^durable_execution_wake_[0-9a-f]{40}$/);
  });

  it('every statement text for a schema names no unqualified table (column references such as ai_commands.status aside) and no default channel', () => {
    expect(STATEMENTS.length).toBeGreaterThanOrEqual(30);
    for (const [name, sql] of STATEMENTS) {
      const text = sql(durableNames('durable'));
      expect([name, text]).not.toEqual([
        name,
        expect.stringMatching(/(?<!\.)\bai_(runs|checkpoints|commands|events|signals)\b(?![_.])/),
      ]);
      expect([name, text]).not.toEqual([name, expect.stringContaining("'durable_execution_done'")]);
    }
  });

  it('refuses a schema that is not a plain identifier, naming it', () => {
    expect(() => durableNames('x"; drop table ai_runs; --')).toThrow(InvalidArgumentError);
    expect(() => durableNames('Durable')).toThrow(/^schema must be a plain PostgreSQL identifier/);
  });
});
