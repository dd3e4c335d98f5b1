import { DurableUsageError } from '../errors/durable-usage.error';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { StaleFenceError } from '../errors/stale-fence.error';
import { FenceQuery, FenceVerifier } from './fence-verifier';

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
