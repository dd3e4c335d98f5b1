import { DurableUsageError } from '../errors/durable-usage.error';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { FenceQuery, FenceVerifier } from './fence-verifier';

/** Issue 46 part 1: `durable_fences` rows expire, only once no token they refuse can pass any more. */
describe('FenceVerifier.sweep', () => {
  const keys = { k1: 'k'.repeat(32) };

  it('deletes rows unused past olderThanMs (default one hour), batch by batch, re-checked on the row', async () => {
    const calls: [string, unknown[]][] = [];
    const query: FenceQuery = async (sql, params) => (calls.push([sql, params]), [{ n: 3 }]);
    expect(await new FenceVerifier({ keys, table: 'svc.fences' }).sweep(query)).toBe(3);
    const old = `seen_at < now() - $1::double precision * interval '1 millisecond'`;
    expect(calls).toEqual([
      [
        `with gone as (delete from svc.fences f where f.${old} and f.run_id in ` +
          `(select run_id from svc.fences where ${old} limit $2) returning 1) select count(*)::int as n from gone`,
        [3_600_000, 10_000],
      ],
    ]);
  });

  it('refuses an olderThanMs below maxTokenLifetimeMs + 2 × clockSkewMs (a younger row may still be needed)', async () => {
    const v = new FenceVerifier({ keys, maxTokenLifetimeMs: 60_000, clockSkewMs: 5_000 });
    const query = jest.fn<ReturnType<FenceQuery>, Parameters<FenceQuery>>(async () => [{ n: 0 }]);
    await expect(v.sweep(query, { olderThanMs: 69_999 })).rejects.toThrow(/at least .* \(70000\)/);
    await expect(v.sweep(query, { limit: 0 })).rejects.toThrow(InvalidArgumentError);
    expect(query).not.toHaveBeenCalled();
    expect(await v.sweep(query, { olderThanMs: 70_000, limit: 5 })).toBe(0);
    expect(query.mock.calls[0][1]).toEqual([70_000, 5]);
  });

  it('refuses to sweep without keys: unsigned tokens never expire', async () => {
    const query = jest.fn<ReturnType<FenceQuery>, Parameters<FenceQuery>>(async () => [{ n: 0 }]);
    await expect(new FenceVerifier().sweep(query)).rejects.toThrow(DurableUsageError);
    await expect(new FenceVerifier().sweep(query)).rejects.toThrow(
      /without keys, fencing tokens never expire/,
    );
    expect(query).not.toHaveBeenCalled();
  });
});
