import { INestApplication } from '@nestjs/common';
import { RunRepository } from '../../src';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { FakeTarget, startFakeTarget } from '../helpers/fake-target';
import { spawnWorker, waitFor, WorkerProcess } from '../helpers/processes';
import { prepareWorkerSchema } from '../helpers/schema';
import { ChargeWorkflow, Payments, PoSteps, SleepyWorkflow } from '../fixtures/worker-app';

const status = async (db: TestDatabase, id: string) =>
  (await db.query(`select status, parked_reason from ai_runs where id = $1`, [id]))[0];

describe('commands across OS processes', () => {
  let db: TestDatabase;
  let target: FakeTarget;
  const workers: WorkerProcess[] = [];
  const spawn = (env: Record<string, string> = {}) => {
    const w = spawnWorker({ DB_URL: db.url, TARGET_URL: target.url, STEP_DELAY_MS: '20', ...env });
    workers.push(w);
    return w;
  };

  beforeEach(async () => {
    db = await createTestDatabase('cmdcrash');
    await prepareWorkerSchema(db.url);
    // A target that does NOT deduplicate: every POST is an effect, so any repeat would show.
    target = await startFakeTarget({ honoursKeys: false });
  });
  afterEach(async () => {
    for (const w of workers.splice(0)) {
      w.child.kill('SIGKILL');
      await w.exited;
    }
    await target.close();
    await db.drop();
  });

  async function crashAfterDispatch(policy: string): Promise<{ id: string; key: string }> {
    const [{ id }] = await db.query(
      `insert into ai_runs (kind, input) values ('charge', '{"amount": 42}') returning id`,
    );
    const key = `run_${id}:step_2:charge_card`;
    const victim = spawn({ CMD_POLICY: policy, DURABLE_CRASH_AT: 'after-command-dispatch' });
    expect((await victim.exited).signal).toBe('SIGKILL');
    expect(target.effects()[key]).toBe(1); // the target applied it; nothing was recorded
    const [cmd] = await db.query(`select status from ai_commands where idempotency_key = $1`, [key]);
    expect(cmd.status).toBe('pending');
    return { id, key };
  }

  it.each(['lookup', 'retry-with-key'])(
    'killed inside the command after the target applied it (%s): the effect count stays 1',
    async (policy) => {
      const t = await startFakeTarget({ honoursKeys: true });
      await target.close();
      target = t; // retry-with-key needs a target that deduplicates keys; lookup works either way
      const { id, key } = await crashAfterDispatch(policy);
      spawn({ CMD_POLICY: policy });
      await waitFor(async () => (await status(db, id)).status === 'succeeded', 30_000, 'the run to succeed');
      expect(target.effects()[key]).toBe(1);
      expect(target.requests()[key]).toBe(policy === 'lookup' ? 1 : 2);
      const [cmd] = await db.query(`select status, resolution from ai_commands where idempotency_key = $1`, [
        key,
      ]);
      expect(cmd).toEqual({ status: 'succeeded', resolution: policy === 'lookup' ? 'lookup' : null });
      // The reconciler found the dead lease and named the command whose outcome it hid.
      const [rec] = await db.query(
        `select payload from ai_events where run_id = $1 and event_type = 'run.reconciled'`,
        [id],
      );
      expect(rec.payload.inDoubt).toEqual([key]);
    },
    90_000,
  );

  it("killed inside the command under 'manual': the run parks and an operator call finishes it", async () => {
    const { id, key } = await crashAfterDispatch('manual');
    spawn({ CMD_POLICY: 'manual' });
    await waitFor(
      async () => (await status(db, id)).parked_reason?.includes('in doubt'),
      30_000,
      'the run to park',
    );
    let api: INestApplication | undefined;
    try {
      // An API-only pod: worker and reconciler off, the same workflow classes registered.
      api = await bootApp(db.url, [PoSteps, Payments, ChargeWorkflow, SleepyWorkflow]);
      await api
        .get(RunRepository)
        .resolveCommand(key, { outcome: 'succeeded', result: { chargeId: 'ch_1', amount: 42 } }, 'ops');
    } finally {
      await api?.close();
    }
    await waitFor(async () => (await status(db, id)).status === 'succeeded', 30_000, 'the run to succeed');
    expect(target.effects()[key]).toBe(1);
    const [run] = await db.query(`select output from ai_runs where id = $1`, [id]);
    expect(run.output).toEqual({ charged: { chargeId: 'ch_1', amount: 42 } });
  }, 90_000);

  it('200 runs that each charge once, with workers SIGKILLed at random: one effect per key', async () => {
    await db.query(
      `insert into ai_runs (kind, input) select 'charge', '{"amount": 1}' from generate_series(1, 200)`,
    );
    const live: WorkerProcess[] = [spawn(), spawn(), spawn()];
    let kills = 0;
    let seed = 42;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const deadline = Date.now() + 12_000;
    while (Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 600 + rand() * 900));
      const i = Math.floor(rand() * live.length);
      live[i].child.kill('SIGKILL');
      await live[i].exited;
      kills++;
      live[i] = spawn();
    }
    await waitFor(
      async () =>
        (await db.query(`select count(*)::int as n from ai_runs where status = 'succeeded'`))[0].n === 200,
      90_000,
      'all 200 runs to succeed',
    );
    const effects = target.effects();
    const keys = await db.query(`select idempotency_key from ai_commands`);
    expect(keys).toHaveLength(200);
    expect(keys.filter((k) => effects[k.idempotency_key] !== 1)).toEqual([]);
    expect(Object.keys(effects)).toHaveLength(200);
    const resolved = await db.query(
      `select count(*)::int as n from ai_events where event_type = 'command.resolved'`,
    );
    console.log(
      `random kills: ${kills}; in-doubt commands settled by lookup: ${resolved[0].n}; effects: 200/200 keys exactly once`,
    );
  }, 180_000);

  it('a 2 s ctx.sleep wakes on time after a worker restart (database clock)', async () => {
    const [{ id }] = await db.query(
      `insert into ai_runs (kind, input) values ('sleepy', '{"ms": 2000}') returning id`,
    );
    const a = spawn();
    await waitFor(async () => (await status(db, id)).status === 'waiting', 20_000, 'the run to sleep');
    a.child.kill('SIGKILL');
    await a.exited;
    const [{ due }] = await db.query(
      `select output #>> '{}' as due from ai_checkpoints where run_id = $1 and step_name = '$due'`, // recorded when the sleep was called
      [id],
    );
    const b = spawn();
    await b.ready;
    const readyAt = Date.now();
    await waitFor(async () => (await status(db, id)).status === 'succeeded', 20_000, 'the run to wake');
    const [row] = await db.query(
      `select extract(epoch from (finished_at - $2::timestamptz)) * 1000 as late_ms from ai_runs where id = $1`,
      [id, due],
    );
    const lateMs = Number(row.late_ms);
    console.log(
      `sleep woke ${Math.round(lateMs)} ms after its due time (worker B was ready ${readyAt - Date.parse(due)} ms after the due time)`,
    );
    expect(lateMs).toBeGreaterThanOrEqual(0); // never early
    expect(lateMs).toBeLessThan(Math.max(0, readyAt - Date.parse(due)) + 1500);
  }, 60_000);
});
