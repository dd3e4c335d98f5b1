import { INestApplication, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import {
  CommandContext,
  CommandFence,
  CommandLookup,
  DurableWorkflow,
  IdempotentCommand,
  LookupContext,
  LookupResult,
  NonRetryableError,
  RunRepository,
} from '../../src';
import { fenceHeaders, FenceToken, FenceVerifier, signFence } from '../../src/fence';
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
        commandKey: key, // the command the token is for (issue 46); no signature without the module option
      });
      expect(f.epoch).toBeGreaterThanOrEqual(1);
      expect(await applied({ key })).toEqual([`${f.timeline}/${f.epoch}`]);
      expect(await kept(id)).toEqual({ timeline: f.timeline, epoch: f.epoch });
    });
  });

  /**
   * Issue 46 part 1, the measured attack: a plain request with epoch=1000 for a real run passed the
   * verifier and the guard, applied a transfer, and locked the real worker out (409 for good); a made-up
   * run id added a row; run R3's token passed with run R1's command key. With keys at the target and
   * the module option `fence` at the worker, each is refused 401 before the table, and the worker goes on.
   */
  describe('signed tokens: a target with keys, a worker with the module option fence', () => {
    const OLD = 'old-secret-0123456789abcdef0123456789';
    const NEW = 'new-secret-0123456789abcdef0123456789';
    let signed: { app: INestApplication; url: string };
    let app: INestApplication;
    const tokens: CommandFence[] = [];
    const lookups: CommandFence[] = [];
    /** Runs inside the first command of a run, after its transfer applied: the attacker's turn. */
    let attack: ((real: CommandFence, key: string) => Promise<void>) | undefined;
    let loseSecondAnswer = false;

    async function post(url: string, headers: Record<string, string>, key: string, amountCents = 999_999) {
      const res = await fetch(`${url}/transfers`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ idempotencyKey: key, account: 'acc-signed', amountCents }),
      });
      return { status: res.status, body: (await res.json()) as any };
    }
    async function get(url: string, headers: Record<string, string>, key: string) {
      const res = await fetch(`${url}/transfers/${encodeURIComponent(key)}`, { headers });
      return { status: res.status, body: (await res.json()) as any };
    }

    @Injectable()
    class SignedTransferClient implements CommandLookup {
      @IdempotentCommand({ name: 'signed-transfer', inDoubt: 'lookup' })
      async transfer(args: { amountCents: number }, ctx?: CommandContext) {
        tokens.push({ ...ctx!.fence }); // as sent: the lease end and the MAC are read at each use
        const res = await post(signed.url, fenceHeaders(ctx!.fence), ctx!.idempotencyKey, args.amountCents);
        if (res.status !== 201)
          throw new NonRetryableError(`transfer answered ${res.status}: ${res.body.message}`);
        const hook = attack;
        attack = undefined;
        await hook?.(ctx!.fence, ctx!.idempotencyKey);
        if (loseSecondAnswer && args.amountCents === 200) {
          loseSecondAnswer = false;
          throw new Error('socket hang up'); // applied, the answer lost: looked up with a signed token
        }
        return res.body;
      }

      async lookupCommand(_command: string, key: string, context?: LookupContext): Promise<LookupResult> {
        lookups.push({ ...context!.fence });
        const res = await get(signed.url, fenceHeaders(context!.fence), key);
        if (res.status !== 200) throw new Error(`lookup answered ${res.status}`);
        return res.body as LookupResult;
      }
    }

    @DurableWorkflow('signed-transfers')
    class SignedTransfersWorkflow {
      constructor(private readonly client: SignedTransferClient) {}
      async run() {
        const first = await this.client.transfer({ amountCents: 100 });
        const second = await this.client.transfer({ amountCents: 200 });
        return { first, second };
      }
    }

    beforeAll(async () => {
      // The target lists the old and the new key (a rotation under way); the worker still signs with the old.
      signed = await startFencedTarget({ databaseUrl: db.url, logger: false, keys: { k1: OLD, k2: NEW } });
      app = await bootApp(db.url, [SignedTransferClient, SignedTransfersWorkflow], {
        fence: { keyId: 'k1', secret: OLD },
      });
    });
    afterAll(async () => {
      await app?.close();
      await signed?.app.close();
    });

    const runOnce = async () => {
      const { run } = await app.get(RunRepository).start('signed-transfers', {});
      return driveUntil(app, db, run.id);
    };
    const fenceRows = async () => (await db.query(`select count(*)::int as n from durable_fences`))[0].n;

    it('a real worker’s signed token passes end to end (send and lookup), under the old key id while listed', async () => {
      tokens.length = 0;
      lookups.length = 0;
      loseSecondAnswer = true;
      const run = await runOnce();
      expect(run.status).toBe('succeeded');
      expect(tokens).toHaveLength(2);
      const [t1, t2] = tokens;
      expect(t1.signature).toMatchObject({ keyId: 'k1' }); // expiring at the lease's end (two reads: ±1 ms)
      expect(Math.abs(t1.signature!.expiresAtMs - t1.leaseExpiresAt.getTime())).toBeLessThanOrEqual(1);
      expect(fenceHeaders(t1)['durable-fence']).toMatch(/^v2;kid=k1;run=/);
      expect(t1.commandKey).not.toBe(t2.commandKey);
      expect(lookups).toHaveLength(1); // the second's answer was lost: looked up, found, not sent again
      expect(lookups[0]).toMatchObject({ commandKey: t2.commandKey, signature: { keyId: 'k1' } });
      expect(await applied({ runId: run.id })).toEqual([
        `${t1.timeline}/${t1.epoch}`,
        `${t2.timeline}/${t2.epoch}`,
      ]);
      expect(run.output).toMatchObject({ first: { amountCents: 100 }, second: { amountCents: 200 } });
    });

    const reasonText = {
      unsigned: 'is not signed (a v1 token)',
      forged: 'MAC does not match key "k1"',
      expired: 'expired at',
      'other-command': 'signed for another command',
    } as const;

    it('forged, tampered, expired, unsigned and other-command tokens are refused 401 before the table; the real worker still writes', async () => {
      const earlier = await runOnce(); // run R1: its tokens and keys are what an attacker might have seen
      const [r1] = tokens.slice(-2);
      const outcomes: Record<string, { status: number; body: any }> = {};
      let before = 0;
      let fenceOfRun: unknown;
      attack = async (real, key) => {
        before = await fenceRows();
        fenceOfRun = await kept(real.runId);
        const { runId, timeline } = real;
        const at = (over: object) => ({
          keyId: 'k1',
          secret: OLD,
          commandKey: key,
          expiresAt: Date.now() + 20_000,
          ...over,
        });
        const next = 'k-not-sent-yet';
        outcomes.unsigned = await post(signed.url, fenceHeaders({ runId, timeline, epoch: 1000 }), next);
        outcomes.guessedSecret = await post(
          signed.url,
          fenceHeaders(
            signFence({ runId, timeline, epoch: 1000 }, at({ secret: 'guess'.repeat(8), commandKey: next })),
          ),
          next,
        );
        outcomes.tampered = await post(signed.url, fenceHeaders({ ...real, epoch: 1000 }), key);
        outcomes.expired = await post(
          signed.url,
          fenceHeaders(signFence({ runId, timeline, epoch: 1000 }, at({ expiresAt: Date.now() - 60_000 }))),
          key,
        );
        outcomes.r3TokenR1Key = await post(signed.url, fenceHeaders(real), r1.commandKey!);
        outcomes.r1TokenR3Key = await post(signed.url, fenceHeaders(r1), key);
        outcomes.madeUpRun = await post(
          signed.url,
          fenceHeaders(
            signFence({ runId: 'made-up-run', timeline: 1, epoch: 1 }, at({ secret: 'guess'.repeat(8) })),
          ),
          key,
        );
        outcomes.lookupUnsigned = await get(signed.url, fenceHeaders({ runId, timeline, epoch: 1000 }), key);
        outcomes.lookupOtherKey = await get(signed.url, fenceHeaders(real), r1.commandKey!);
        outcomes.afterwards = { status: 0, body: { rows: await fenceRows(), kept: await kept(runId) } };
      };
      const run = await runOnce(); // run R3
      expect(earlier.status).toBe('succeeded');
      const reasons = {
        unsigned: 'unsigned',
        guessedSecret: 'forged',
        tampered: 'forged',
        expired: 'expired',
        r3TokenR1Key: 'other-command',
        r1TokenR3Key: 'other-command',
        madeUpRun: 'forged',
        lookupUnsigned: 'unsigned',
        lookupOtherKey: 'other-command',
      } as const;
      for (const [name, reason] of Object.entries(reasons)) {
        expect([name, outcomes[name].status]).toEqual([name, 401]);
        expect(outcomes[name].body).toEqual({
          statusCode: 401,
          code: 'DURABLE_UNAUTHENTICATED_FENCE',
          message: expect.stringMatching(/Nothing was written and the fence was not changed\.$/),
        });
        expect([name, outcomes[name].body.message]).toEqual([
          name,
          expect.stringContaining(reasonText[reason]),
        ]);
      }
      // Nothing reached the table: no row for the made-up run, the real run's pair not raised.
      expect(outcomes.afterwards.body).toEqual({ rows: before, kept: fenceOfRun });
      expect(await kept('made-up-run')).toBeUndefined();
      // The real worker's second command wrote after the attack, and nothing else was applied.
      expect(run.status).toBe('succeeded');
      const [t1, t2] = tokens.slice(-2);
      expect(await applied({ runId: run.id })).toEqual([
        `${t1.timeline}/${t1.epoch}`,
        `${t2.timeline}/${t2.epoch}`,
      ]);
      expect(await db.query(`select count(*)::int as n from transfers where amount_cents = 999999`)).toEqual([
        { n: 0 },
      ]);
    });

    it('rows are swept only per the rule: unused past olderThanMs ≥ lifetime + 2 × skew; a token older than a swept row has expired', async () => {
      const verifier = new FenceVerifier({ keys: { k1: OLD } }); // lifetime 30 s, skew 10 s: at least 50 s
      const query = (sql: string, params: unknown[]) => db.query(sql, params);
      const ages = { 'sw-2h': '2 hours', 'sw-30m': '30 minutes', 'sw-40s': '40 seconds' };
      for (const [run, age] of Object.entries(ages))
        await db.query(
          `insert into durable_fences (run_id, timeline, epoch, seen_at) values ($1, 1, 5, now() - $2::interval)`,
          [run, age],
        );
      const left = async () =>
        (await db.query(`select run_id from durable_fences where run_id like 'sw-%' order by run_id`)).map(
          (r) => r.run_id,
        );
      await expect(verifier.sweep(query, { olderThanMs: 49_999 })).rejects.toThrow(/at least .* \(50000\)/);
      await expect(new FenceVerifier().sweep(query)).rejects.toThrow(
        /without keys, fencing tokens never expire/,
      );
      expect(await left()).toEqual(['sw-2h', 'sw-30m', 'sw-40s']);
      expect(await verifier.sweep(query)).toBe(1); // default: an hour
      expect(await left()).toEqual(['sw-30m', 'sw-40s']);
      expect(await verifier.sweep(query, { olderThanMs: 50_000 })).toBe(1);
      expect(await left()).toEqual(['sw-40s']); // used 40 s ago: a token it refuses may still be alive
      // sw-30m's row is gone; the tokens of its older claims expired long ago and stay refused.
      const zombie = signFence(
        { runId: 'sw-30m', timeline: 1, epoch: 4 },
        {
          keyId: 'k1',
          secret: OLD,
          commandKey: 'k-zombie',
          expiresAt: Date.now() - 30 * 60_000,
        },
      );
      const res = await post(signed.url, fenceHeaders(zombie), 'k-zombie');
      expect([res.status, res.body.code]).toEqual([401, 'DURABLE_UNAUTHENTICATED_FENCE']);
      expect(await kept('sw-30m')).toBeUndefined();
    });
  });
});
