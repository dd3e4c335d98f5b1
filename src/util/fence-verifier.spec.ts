import { Logger } from '@nestjs/common';
import { DurableUsageError } from '../errors/durable-usage.error';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { StaleFenceError } from '../errors/stale-fence.error';
import { UnauthenticatedFenceError } from '../errors/unauthenticated-fence.error';
import { signFence } from './fence-signature';
import type { FenceToken } from './fence-token';
import { FenceQuery, FenceVerifier, FenceVerifierOptions } from './fence-verifier';

const token = { runId: 'run-1', timeline: 2, epoch: 7 };

describe('FenceVerifier', () => {
  it('creates durable_fences by default, or the table given, optionally schema-qualified', () => {
    expect(new FenceVerifier().createTableSql()).toBe(
      'create table if not exists durable_fences (run_id text primary key, timeline integer not null, ' +
        'epoch bigint not null, seen_at timestamptz not null default now())',
    );
    expect(new FenceVerifier({ table: 'ledger.fences' }).createTableSql()).toMatch(
      /^create table if not exists ledger\.fences \(/,
    );
  });

  it.each([
    'Fences',
    'fences; drop table x',
    'a.b.c',
    '1fences',
    '"fences"',
    'pg_fences',
    'x.pg_f',
    '',
    'f'.repeat(64),
  ])('refuses the table name %j (it is written into the statements)', (table) => {
    expect(() => new FenceVerifier({ table })).toThrow(InvalidArgumentError);
  });

  it('runs one upsert that keeps the greatest (timeline, epoch) and returns a row when the token passes', async () => {
    const calls: [string, unknown[]][] = [];
    const query: FenceQuery = async (sql, params) => {
      calls.push([sql, params]);
      return [{ '?column?': 1 }];
    };
    await new FenceVerifier({ table: 'svc.fences' }).check(query, {
      ...token,
      leaseExpiresAt: new Date(),
    } as never);
    expect(calls).toEqual([
      [
        'insert into svc.fences as f (run_id, timeline, epoch) values ($1, $2, $3) ' +
          'on conflict (run_id) do update set timeline = excluded.timeline, epoch = excluded.epoch, seen_at = now() ' +
          'where (f.timeline, f.epoch) <= (excluded.timeline, excluded.epoch) returning 1',
        ['run-1', 2, 7],
      ],
    ]);
  });

  it('throws StaleFenceError (DURABLE_STALE_FENCE) when no row comes back: a greater pair was seen', async () => {
    const err = await new FenceVerifier().check(async () => [], token).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StaleFenceError);
    expect(err).toMatchObject({ code: 'DURABLE_STALE_FENCE', runId: 'run-1', timeline: 2, epoch: 7 });
    expect((err as Error).message).toMatch(/worker whose claim was superseded and it must not be applied/);
  });

  it('refuses a token built by hand that the header could not carry, before any query', async () => {
    const query = jest.fn<ReturnType<FenceQuery>, Parameters<FenceQuery>>(async () => [1]);
    await expect(new FenceVerifier().check(query, { ...token, epoch: -1 })).rejects.toThrow(
      InvalidArgumentError,
    );
    await expect(new FenceVerifier().check(query, { ...token, runId: 'a b' })).rejects.toThrow(/token runId/);
    expect(query).not.toHaveBeenCalled();
  });

  it('says how to pass a pg client when the query function resolves to a result, not its rows', async () => {
    const pgLike = (async () => ({ rows: [], rowCount: 0 })) as unknown as FenceQuery;
    await expect(new FenceVerifier().check(pgLike, token)).rejects.toThrow(DurableUsageError);
    await expect(new FenceVerifier().check(pgLike, token)).rejects.toThrow(/\.then\(\(r\) => r\.rows\)/);
  });
});

/** Issue 46 part 1: with keys, a token that is not authentic is refused before the table is touched. */
describe('FenceVerifier with keys (signed tokens)', () => {
  const OLD = 'o'.repeat(32);
  const NEW = 'n'.repeat(48);
  const KEY = 'run_run-1:step_2:transfer';
  const pair = { runId: 'run-1', timeline: 1, epoch: 4 };
  const signed = (over: Partial<Parameters<typeof signFence>[1]> = {}, p = pair) =>
    signFence(p, { keyId: 'k2', secret: NEW, commandKey: KEY, expiresAt: Date.now() + 20_000, ...over });
  const verifier = (options: FenceVerifierOptions = {}) =>
    new FenceVerifier({ keys: { k2: NEW }, ...options });
  const passing = () => jest.fn<ReturnType<FenceQuery>, Parameters<FenceQuery>>(async () => [1]);

  /** What `check` threw (an UnauthenticatedFenceError), with the query never called. */
  async function refused(v: FenceVerifier, token: FenceToken, commandKey = KEY) {
    const query = passing();
    const err = await v.check(query, token, { commandKey }).catch((e: unknown) => e);
    expect(query).not.toHaveBeenCalled();
    expect(err).toBeInstanceOf(UnauthenticatedFenceError);
    expect(() => v.authenticate(token, { commandKey })).toThrow(UnauthenticatedFenceError);
    return err as UnauthenticatedFenceError;
  }

  it('a real signed token passes: one upsert of its pair, as without keys', async () => {
    const query = passing();
    await verifier().check(query, signed(), { commandKey: KEY });
    expect(query).toHaveBeenCalledTimes(1);
    expect(query.mock.calls[0][1]).toEqual(['run-1', 1, 4]);
    expect(verifier().signed).toBe(true);
    const t = signed();
    expect(verifier().authenticate(t, { commandKey: KEY })).toEqual(t);
  });

  it.each<[string, () => FenceToken, string, RegExp]>([
    ['unsigned (v1, epoch 1000)', () => ({ ...pair, epoch: 1000 }), 'unsigned', /not signed \(a v1 token\)/],
    [
      'forged: another secret',
      () => signed({ secret: 'x'.repeat(32), keyId: 'k2' }),
      'forged',
      /MAC does not/,
    ],
    [
      'forged: the epoch raised after signing',
      () => ({ ...signed(), epoch: 1000 }),
      'forged',
      /MAC does not match key "k2"/,
    ],
    ['signed with a key id not listed', () => signed({ keyId: 'k9' }), 'unknown-key', /key id "k9"/],
    [
      'expired',
      () => signed({ expiresAt: Date.now() - 10_001 }),
      'expired',
      /expired at .* more than clockSkewMs/,
    ],
    [
      'living longer than any lease',
      () => signed({ expiresAt: Date.now() + 41_000 }),
      'lifetime',
      /maxTokenLifetimeMs/,
    ],
  ])(
    'refuses a token %s with UnauthenticatedFenceError (401) before the table',
    async (_l, make, reason, re) => {
      const err = await refused(verifier(), make());
      expect(err).toMatchObject({ code: 'DURABLE_UNAUTHENTICATED_FENCE', reason, runId: 'run-1' });
      expect(err.message).toMatch(re);
      expect(err.message).toMatch(/Nothing was written and the fence was not changed\.$/);
      expect(err.message).not.toContain(NEW);
    },
  );

  it('refuses another command’s token: run R3’s real token with run R1’s command key', async () => {
    const r3 = signed({ commandKey: 'run_r3:step_0:transfer' }, { runId: 'r3', timeline: 1, epoch: 2 });
    const err = await refused(verifier(), r3, 'run_r1:step_0:transfer');
    expect(err).toMatchObject({ reason: 'other-command', runId: 'r3' });
    expect(err.message).toMatch(/pass the key the request serves to FenceVerifier.check as commandKey/);
  });

  it('allows clockSkewMs past the expiry, and no more', async () => {
    const v = verifier({ clockSkewMs: 5_000 });
    await v.check(passing(), signed({ expiresAt: Date.now() - 4_000 }), { commandKey: KEY });
    expect((await refused(v, signed({ expiresAt: Date.now() - 6_000 }))).reason).toBe('expired');
  });

  it('key rotation: the old key id passes while it is listed, and is refused once it is not', async () => {
    const old = signed({ keyId: 'k1', secret: OLD });
    const both = new FenceVerifier({ keys: { k1: OLD, k2: Buffer.from(NEW) } });
    await both.check(passing(), old, { commandKey: KEY });
    await both.check(passing(), signed(), { commandKey: KEY });
    expect((await refused(verifier(), old)).reason).toBe('unknown-key');
    // The same id under a new secret: the old tokens no longer match.
    expect((await refused(new FenceVerifier({ keys: { k1: NEW } }), old)).reason).toBe('forged');
  });

  it('check needs the command key with keys (a usage error, before anything)', async () => {
    const query = passing();
    await expect(verifier().check(query, signed())).rejects.toThrow(DurableUsageError);
    await expect(verifier().check(query, signed())).rejects.toThrow(
      /pass the idempotency key .* \{ commandKey \}/,
    );
    await expect(verifier().check(query, signed(), { commandKey: '' })).rejects.toThrow(InvalidArgumentError);
    expect(query).not.toHaveBeenCalled();
  });

  it.each<[string, FenceVerifierOptions, RegExp]>([
    ['a short secret', { keys: { k1: 'short' } }, /keys\["k1"\] must have at least 32 bytes .*got 5/],
    ['a bad key id', { keys: { 'k 1': OLD } }, /has a key id that is not 1-64/],
    ['no key at all', { keys: {} }, /at least one key/],
    ['a negative skew', { clockSkewMs: -1 }, /clockSkewMs must be whole milliseconds/],
    [
      'a zero lifetime',
      { maxTokenLifetimeMs: 0 },
      /maxTokenLifetimeMs must be whole milliseconds of at least 1/,
    ],
  ])('refuses %s at construction, never quoting a secret', (_l, options, re) => {
    expect(() => new FenceVerifier(options)).toThrow(re);
    expect(() => new FenceVerifier(options)).toThrow(InvalidArgumentError);
  });

  it('without keys: warns once per process that tokens are not authenticated, and lets any format pass', async () => {
    jest.isolateModules(() => {
      // A fresh copy of the module (its once-per-process flag unset) and of the Logger it logs with.
      /* eslint-disable @typescript-eslint/no-require-imports */
      const { Logger: FreshLogger } = require('@nestjs/common') as { Logger: typeof Logger };
      const { FenceVerifier: Fresh } = require('./fence-verifier') as typeof import('./fence-verifier');
      /* eslint-enable @typescript-eslint/no-require-imports */
      const warn = jest.spyOn(FreshLogger.prototype, 'warn').mockImplementation(() => undefined);
      new Fresh();
      new Fresh();
      new Fresh({ keys: { k2: NEW } });
      expect(warn).toHaveBeenCalledTimes(1);
      expect(warn.mock.calls[0][0]).toMatch(
        /FenceVerifier has no keys: fencing tokens are NOT authenticated/,
      );
      warn.mockRestore();
    });
    const query = passing();
    await new FenceVerifier().check(query, { ...pair, epoch: 1000 });
    expect(query).toHaveBeenCalledTimes(1);
  });
});
