import { INestApplication, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import {
  CommandContext,
  CommandFence,
  CommandLookup,
  DurableWorkflow,
  fenceHeaders,
  FenceToken,
  IdempotentCommand,
  LookupContext,
  LookupResult,
  RunRepository,
} from '../../src';
import { startFencedTarget } from '../../examples/fenced-target/main';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';
import { waitFor } from '../helpers/processes';

/**
 * Issue 34, item 3: fencing tokens a target can check. The example internal service
 * (examples/fenced-target) keeps the greatest (timeline, epoch) per run with FenceVerifier, in the
 * transaction of each write and each lookup, and refuses a smaller one. The scenario of the issue: an
 * epoch-3 worker frozen before its send, an epoch-4 worker that looks the command up (not found) and
 * sends it; the zombie wakes and sends too. Its ledger does not deduplicate keys: every applied request
 * is a row, so a second effect would show.
 */
describe('FenceVerifier at a target the user owns (examples/fenced-target)', () => {
  let db: TestDatabase;
  let target: { app: INestApplication; url: string };

  beforeAll(async () => {
    db = await createTestDatabase('fence');
    target = await startFencedTarget({ databaseUrl: db.url, logger: false });
  });
  afterAll(async () => {
    await target?.app.close();
    await db?.drop();
  });

  const fence = (runId: string, timeline: number, epoch: number): FenceToken => ({ runId, timeline, epoch });
  const headersOf = (f: FenceToken | string | null): Record<string, string> =>
    f === null ? {} : typeof f === 'string' ? { 'durable-fence': f } : fenceHeaders(f);

  async function send(f: FenceToken | string | null, key: string, amountCents = 500) {
    const res = await fetch(`${target.url}/transfers`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headersOf(f) },
      body: JSON.stringify({ idempotencyKey: key, account: 'acc-1', amountCents }),
    });
    return { status: res.status, body: (await res.json()) as any };
  }
  async function lookup(f: FenceToken | string | null, key: string) {
    const res = await fetch(`${target.url}/transfers/${encodeURIComponent(key)}`, { headers: headersOf(f) });
    return { status: res.status, body: (await res.json()) as any };
  }
  /** The (timeline, epoch) of each transfer applied for `key` (or the run), in the order applied. */
  const applied = async (where: { key?: string; runId?: string }) =>
    (
      await db.query(
        `select timeline, epoch::int as epoch from transfers
          where ($1::text is null or idempotency_key = $1) and ($2::text is null or run_id = $2) order by id`,
        [where.key ?? null, where.runId ?? null],
      )
    ).map((r) => `${r.timeline}/${r.epoch}`);
  const kept = async (runId: string) =>
    (
      await db.query(`select timeline, epoch::int as epoch from durable_fences where run_id = $1`, [runId])
    )[0];

  it('a takeover: the new owner’s lookup raises the fence, the zombie’s late send is refused 409 and writes nothing', async () => {
    const run = randomUUID();
    // Epoch 3 owns the run and sends a first command.
    expect((await send(fence(run, 1, 3), 'k-first')).status).toBe(201);
    expect(await applied({ key: 'k-first' })).toEqual(['1/3']);
    // It freezes before sending the next one; epoch 4 takes over and looks the command up: not found.
    const asked = await lookup(fence(run, 1, 4), 'k-second');
    expect(asked).toEqual({ status: 200, body: { found: false } });
    expect(await kept(run)).toEqual({ timeline: 1, epoch: 4 }); // the lookup raised the fence
    // The zombie wakes and sends: refused, nothing written.
    const zombie = await send(fence(run, 1, 3), 'k-second');
    expect(zombie.status).toBe(409);
    expect(zombie.body).toEqual({
      statusCode: 409,
      code: 'DURABLE_STALE_FENCE',
      message: expect.stringMatching(/claim was superseded.*must not be applied/),
    });
    expect(zombie.body.message).toContain(`run ${run}`);
    expect(await applied({ key: 'k-second' })).toEqual([]);
    // Its lookup is refused too (a zombie asking about an older command).
    expect((await lookup(fence(run, 1, 3), 'k-first')).status).toBe(409);
    // The new owner sends: applied once.
    expect((await send(fence(run, 1, 4), 'k-second')).status).toBe(201);
    expect(await applied({ key: 'k-second' })).toEqual(['1/4']);
    expect(await kept(run)).toEqual({ timeline: 1, epoch: 4 });
  });

  it('the same pair twice passes (the same claim sending again), and a lookup by it too', async () => {
    const run = randomUUID();
    expect((await send(fence(run, 1, 5), 'k-retry')).status).toBe(201);
    expect((await send(fence(run, 1, 5), 'k-retry')).status).toBe(201);
    const found = await lookup(fence(run, 1, 5), 'k-retry');
    expect(found.status).toBe(200);
    expect(found.body).toMatchObject({
      found: true,
      result: { idempotencyKey: 'k-retry', amountCents: 500 },
    });
    expect(await applied({ runId: run })).toEqual(['1/5', '1/5']); // the ledger does not deduplicate
  });

  it('compares the timeline first: a higher timeline with a lower epoch passes, the old timeline is refused', async () => {
    const run = randomUUID();
    expect((await send(fence(run, 1, 7), 'k-a')).status).toBe(201);
    // A failover lost the old primary's last commits: the next claim's epoch is lower, its timeline higher.
    expect((await send(fence(run, 2, 2), 'k-b')).status).toBe(201);
    expect(await kept(run)).toEqual({ timeline: 2, epoch: 2 });
    // A worker still on the old timeline, whatever its epoch, is refused.
    expect((await send(fence(run, 1, 8), 'k-c')).status).toBe(409);
    expect(await applied({ runId: run })).toEqual(['1/7', '2/2']);
  });

  it('keeps runs apart: a token of one run never refuses another’s', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    expect((await send(fence(a, 1, 9), 'k-runs-a')).status).toBe(201);
    expect((await send(fence(b, 1, 1), 'k-runs-b')).status).toBe(201);
    expect(await kept(a)).toEqual({ timeline: 1, epoch: 9 });
    expect(await kept(b)).toEqual({ timeline: 1, epoch: 1 });
  });

  it.each<[string, string | null, RegExp]>([
    ['missing', null, /^durable-fence header is missing/],
    ['malformed', 'epoch=3', /^durable-fence header is malformed/],
    ['with a negative epoch', 'run=r1;timeline=1;epoch=-3', /epoch that is not a non-negative integer/],
  ])(
    'a header %s is refused 400 naming the header, on both endpoints, and nothing is written',
    async (_l, h, re) => {
      const before = await db.query(`select count(*)::int as n from durable_fences`);
      for (const res of [await send(h, 'k-bad'), await lookup(h, 'k-bad')]) {
        expect(res.status).toBe(400);
        expect(res.body).toEqual({
          statusCode: 400,
          code: 'DURABLE_INVALID_ARGUMENT',
          message: expect.any(String),
        });
        expect(res.body.message).toMatch(re);
      }
      expect(await applied({ key: 'k-bad' })).toEqual([]);
      expect(await db.query(`select count(*)::int as n from durable_fences`)).toEqual(before);
    },
  );

  describe('two requests at once, one held inside its transaction', () => {
    let holder: Client;
    beforeEach(async () => {
      holder = new Client({ connectionString: db.url });
      await holder.connect();
    });
    afterEach(async () => {
      await holder.query('rollback').catch(() => undefined);
      await holder.end();
    });

    /** Holds every request that reaches the ledger (a read or a write) until `release`. */
    async function holdLedger(): Promise<{ release: () => Promise<void> }> {
      await holder.query('begin');
      await holder.query('lock table transfers in access exclusive mode');
      return { release: () => holder.query('commit').then(() => undefined) };
    }
    /** Waits until `n` statements of the target that start with `prefix` wait on a lock. */
    const waiting = (prefix: string, n = 1) =>
      waitFor(
        async () =>
          (
            await db.query(
              `select count(*)::int as n from pg_stat_activity
                where datname = current_database() and wait_event_type = 'Lock' and ltrim(query) like $1`,
              [`${prefix}%`],
            )
          )[0].n >= n,
        10_000,
        `${n} statement(s) "${prefix}…" waiting on a lock`,
      );

    it('the zombie’s send held after its check: the new owner’s lookup waits for it, then finds it (no second send)', async () => {
      const run = randomUUID();
      const ledger = await holdLedger();
      const zombie = send(fence(run, 1, 3), 'k-held'); // passes its check, then waits at the ledger
      await waiting('insert into transfers');
      const owner = lookup(fence(run, 1, 4), 'k-held'); // waits on the zombie's fence row
      await waiting('insert into durable_fences');
      await ledger.release();
      expect((await zombie).status).toBe(201);
      const found = await owner;
      expect(found.status).toBe(200);
      expect(found.body).toMatchObject({ found: true, result: { idempotencyKey: 'k-held' } });
      expect(await applied({ key: 'k-held' })).toEqual(['1/3']);
      expect(await kept(run)).toEqual({ timeline: 1, epoch: 4 });
    });

    it('the new owner’s lookup held after its check: the zombie’s send waits for it, then is refused', async () => {
      const run = randomUUID();
      expect((await send(fence(run, 1, 3), 'k-before')).status).toBe(201); // the fence row exists: 1/3
      const ledger = await holdLedger();
      const owner = lookup(fence(run, 1, 4), 'k-race'); // raises the fence to 1/4, then waits at the ledger
      await waiting('select * from transfers');
      const zombie = send(fence(run, 1, 3), 'k-race'); // waits on the owner's fence row
      await waiting('insert into durable_fences');
      await ledger.release();
      expect(await owner).toEqual({ status: 200, body: { found: false } });
      const refused = await zombie;
      expect(refused.status).toBe(409);
      expect(refused.body.code).toBe('DURABLE_STALE_FENCE');
      expect((await send(fence(run, 1, 4), 'k-race')).status).toBe(201);
      expect(await applied({ key: 'k-race' })).toEqual(['1/4']);
    });

    it('the owner’s send held after its check: the zombie’s send waits, then is refused (a first token for the run)', async () => {
      const run = randomUUID();
      const ledger = await holdLedger();
      const owner = send(fence(run, 1, 4), 'k-first-token'); // inserts the run's fence row, then waits
      await waiting('insert into transfers');
      const zombie = send(fence(run, 1, 3), 'k-first-token'); // waits on the uncommitted insert
      await waiting('insert into durable_fences');
      await ledger.release();
      expect((await owner).status).toBe(201);
      expect((await zombie).status).toBe(409);
      expect(await applied({ key: 'k-first-token' })).toEqual(['1/4']);
    });
  });

  it('many concurrent sends of one run: what applies is in (timeline, epoch) order, and the greatest always applies', async () => {
    let seed = 34;
    const rand = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
    for (let round = 0; round < 5; round++) {
      const run = randomUUID();
      const tokens = Array.from({ length: 40 }, () => fence(run, 1 + rand(2), 1 + rand(6)));
      const results = await Promise.all(tokens.map((t, i) => send(t, `k-many-${round}-${i}`)));
      for (const r of results) expect([201, 409]).toContain(r.status);
      const order = (await applied({ runId: run })).map((p) => p.split('/').map(Number));
      expect(order).toHaveLength(results.filter((r) => r.status === 201).length);
      for (let i = 1; i < order.length; i++) {
        const [[t0, e0], [t1, e1]] = [order[i - 1], order[i]];
        expect(t0 < t1 || (t0 === t1 && e0 <= e1)).toBe(true);
      }
      const greatest = tokens.reduce((a, b) =>
        a.timeline > b.timeline || (a.timeline === b.timeline && a.epoch >= b.epoch) ? a : b,
      );
      tokens.forEach((t, i) => {
        if (t.timeline === greatest.timeline && t.epoch === greatest.epoch)
          expect(results[i].status).toBe(201);
      });
      expect(await kept(run)).toEqual({ timeline: greatest.timeline, epoch: greatest.epoch });
    }
  });

  describe('the engine sends the claim’s token to lookups', () => {
    let app: INestApplication;
    const sent: CommandFence[] = [];
    const asked: LookupContext[] = [];
    let loseAnswer = true;

    @Injectable()
    class TransferClient implements CommandLookup {
      @IdempotentCommand({ name: 'transfer', inDoubt: 'lookup' })
      async transfer(args: { amountCents: number }, ctx?: CommandContext) {
        sent.push(ctx!.fence);
        const res = await fetch(`${target.url}/transfers`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...fenceHeaders(ctx!.fence) },
          body: JSON.stringify({ idempotencyKey: ctx!.idempotencyKey, account: 'acc-9', ...args }),
        });
        if (res.status !== 201) throw new Error(`transfer answered ${res.status}`);
        if (loseAnswer) {
          loseAnswer = false;
          throw new Error('socket hang up'); // applied, the answer lost: the command is in doubt
        }
        return res.json();
      }

      async lookupCommand(_command: string, key: string, context?: LookupContext): Promise<LookupResult> {
        asked.push(context!);
        const res = await fetch(`${target.url}/transfers/${encodeURIComponent(key)}`, {
          headers: fenceHeaders(context!.fence),
        });
        if (res.status !== 200) throw new Error(`lookup answered ${res.status}`);
        return (await res.json()) as LookupResult;
      }
    }

    @DurableWorkflow('fenced-transfer')
    class FencedTransferWorkflow {
      constructor(private readonly client: TransferClient) {}
      async run(input: { amountCents: number }) {
        return { transfer: await this.client.transfer({ amountCents: input.amountCents }) };
      }
    }

    beforeAll(async () => {
      app = await bootApp(db.url, [TransferClient, FencedTransferWorkflow]);
    });
    afterAll(async () => {
      await app?.close();
    });

    it('a command in doubt is looked up with { fence }: the target checks it and finds the transfer', async () => {
      const {
        run: { id },
      } = await app.get(RunRepository).start('fenced-transfer', { amountCents: 1200 });
      const run = await driveUntil(app, db, id);
      expect(run.status).toBe('succeeded');
      const key = (run.output as { transfer: { idempotencyKey: string } }).transfer.idempotencyKey;
      expect(key).toMatch(new RegExp(`^run_${id}:step_\\d+:transfer$`));
      expect(run.output).toEqual({
        transfer: {
          transferId: expect.any(Number),
          idempotencyKey: key,
          account: 'acc-9',
          amountCents: 1200,
        },
      });
      expect(sent).toHaveLength(1);
      expect(asked).toHaveLength(1);
      const { fence: f } = asked[0];
      expect(f).toEqual({
        runId: id,
        timeline: sent[0].timeline,
        epoch: sent[0].epoch,
        leaseExpiresAt: expect.any(Date),
      });
      expect(f.epoch).toBeGreaterThanOrEqual(1);
      expect(await applied({ key })).toEqual([`${f.timeline}/${f.epoch}`]);
      expect(await kept(id)).toEqual({ timeline: f.timeline, epoch: f.epoch });
    });
  });
});
