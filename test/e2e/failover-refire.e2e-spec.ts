import { INestApplication, Injectable } from '@nestjs/common';
import {
  CommandContext,
  CommandLookup,
  DurableCron,
  DurableWorkflow,
  IdempotentCommand,
  RunContext,
  RunRepository,
} from '../../src';
import { ScheduleRunner } from '../../src/maintenance/schedule-runner.service';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';

/**
 * Runs the engine creates itself, created again after a failover lost the first creation (issue 23,
 * item 4): a child run started on the old primary, a schedule's tick fired there. Their first run may
 * have sent its commands before the commits saying so were lost. The one created again must have the
 * same id (its command keys name it) and look each command up before a first send; else a target that
 * does not deduplicate charges twice. The loss is made with SQL: the first run's rows deleted and the
 * parent's or schedule's row moved to an older WAL timeline (the one thing this shared server cannot
 * do itself; the real failover is test/e2e/failover.e2e-spec.ts).
 */
const target = { applied: new Map<string, unknown>(), sends: [] as string[], lookups: [] as string[] };

@Injectable()
class Gateway implements CommandLookup {
  @IdempotentCommand({ name: 'rf_charge', inDoubt: 'lookup' })
  async charge(args: { amount: number }, ctx?: CommandContext) {
    target.sends.push(ctx!.idempotencyKey);
    const result = { chargeId: `ch_${target.sends.length}`, ...args };
    target.applied.set(ctx!.idempotencyKey, result);
    return result;
  }
  async lookupCommand(_command: string, key: string) {
    target.lookups.push(key);
    return target.applied.has(key)
      ? { found: true as const, result: target.applied.get(key) }
      : { found: false as const };
  }
}

@DurableWorkflow('rf-charge')
class ChargeFlow {
  constructor(private readonly gw: Gateway) {}
  async run(input: { amount: number }) {
    return this.gw.charge({ amount: input.amount });
  }
}

@DurableWorkflow('rf-parent')
class ParentFlow {
  async run(input: { amount: number }, ctx: RunContext) {
    return ctx.child('rf-charge', input);
  }
}

/** Yearly: the test makes its tick due by hand. */
@DurableCron('0 0 1 1 *', { name: 'rf-yearly' })
@DurableWorkflow('rf-scheduled')
class ScheduledCharge {
  constructor(private readonly gw: Gateway) {}
  async run() {
    return this.gw.charge({ amount: 11 });
  }
}

describe('runs the engine creates again after a lost WAL suffix', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  const row = async (id: string) =>
    (await db.query(`select id, lookup_first, idempotency_key from ai_runs where id = $1`, [id]))[0];

  beforeAll(async () => {
    db = await createTestDatabase('failover_refire');
    app = await bootApp(db.url, [Gateway, ChargeFlow, ParentFlow, ScheduledCharge]);
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });
  beforeEach(() => {
    target.applied.clear();
    target.sends = [];
    target.lookups = [];
  });

  it('a child started again has the id of the lost one and looks its charge up instead of sending it again', async () => {
    const { run: parent } = await runs.start('rf-parent', { amount: 5 });
    expect((await driveUntil(app, db, parent.id)).status).toBe('succeeded'); // the child ran too
    const [first] = await db.query(`select id, idempotency_key from ai_runs where parent_id = $1`, [
      parent.id,
    ]);
    const key = `run_${first.id}:step_0:rf_charge`;
    expect(target.sends).toEqual([key]);
    // The failover: everything after the parent's claim was lost with the old primary's last commits
    // (the child, the parent's record of starting it, the child's end, the parent's end); the parent's
    // row says it was last claimed on the timeline the server left, and it is due again.
    await db.query(`delete from ai_runs where id = $1`, [first.id]);
    await db.query(`delete from ai_checkpoints where run_id = $1`, [parent.id]);
    await db.query(`delete from ai_signals where run_id = $1`, [parent.id]);
    await db.query(
      `update ai_runs set status = 'waiting', available_at = now(), worker_id = null, lease_expires_at = null,
              output = null, finished_at = null, has_children = false, timeline = timeline - 1
        where id = $1`,
      [parent.id],
    );
    const done = await driveUntil(app, db, parent.id);
    const [again] = await db.query(`select id from ai_runs where parent_id = $1`, [parent.id]);
    expect(await row(again.id)).toEqual({ ...first, lookup_first: true });
    expect(done.output).toEqual({ chargeId: 'ch_1', amount: 5 });
    expect(target.lookups).toEqual([key]);
    expect(target.sends).toEqual([key]); // the first child's send only
  });

  it("a schedule's tick fired again has the id of the lost run and looks its charge up", async () => {
    const runner = app.get(ScheduleRunner);
    await runner.tick(); // declares the schedule (its tick is next year)
    const due = `date_trunc('second', now()) - interval '1 minute'`;
    await db.query(`update ai_schedules set next_at = ${due} where name = 'rf-yearly'`);
    const [{ next_at: tick }] = await db.query(`select next_at from ai_schedules where name = 'rf-yearly'`);
    expect(await runner.tick()).toBe(1);
    const [first] = await db.query(`select id, idempotency_key from ai_runs where kind = 'rf-scheduled'`);
    expect(await row(first.id)).toEqual({ ...first, lookup_first: false });
    expect((await driveUntil(app, db, first.id)).status).toBe('succeeded');
    const key = `run_${first.id}:step_0:rf_charge`;
    expect(target.sends).toEqual([key]);
    // The failover: the firing (the run, the schedule's move to its next tick) was lost; the schedule's
    // row was last written on the timeline the server left.
    await db.query(`delete from ai_runs where id = $1`, [first.id]);
    await db.query(`update ai_schedules set next_at = $1, timeline = timeline - 1 where name = 'rf-yearly'`, [
      tick,
    ]);
    expect(await runner.tick()).toBe(1);
    const [again] = await db.query(`select id from ai_runs where kind = 'rf-scheduled'`);
    expect(await row(again.id)).toEqual({ ...first, lookup_first: true });
    expect((await driveUntil(app, db, again.id)).output).toEqual({ chargeId: 'ch_1', amount: 11 });
    expect(target.lookups).toEqual([key]);
    expect(target.sends).toEqual([key]);
    // The schedule's row now says the server's timeline: its next firing sends at once again.
    const [{ same }] = await db.query(
      `select timeline = ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int as same
         from ai_schedules where name = 'rf-yearly'`,
    );
    expect(same).toBe(true);
  });
});
