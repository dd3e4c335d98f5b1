import { createTestDatabase, TestDatabase } from '../helpers/database';
import { spawnWorker, waitFor, WorkerProcess } from '../helpers/processes';
import { prepareWorkerSchema } from '../helpers/schema';

async function insertRuns(db: TestDatabase, n: number): Promise<string[]> {
  const rows = await db.query(
    `insert into ai_runs (kind, input) select 'po9', jsonb_build_object('n', g) from generate_series(1, $1) g returning id`,
    [n],
  );
  return rows.map((r) => r.id);
}

/** Waits until `n` runs were claimed a second time (epoch 2): by the worker that took them over. */
function claimedAgain(db: TestDatabase, n: number, timeoutMs: number): Promise<void> {
  const claimed = async () =>
    (
      await db.query(
        `select count(distinct run_id)::int as n from ai_events where event_type = 'run.claimed' and epoch = 2`,
      )
    )[0].n === n;
  return waitFor(claimed, timeoutMs, `the ${n} runs to be claimed by worker B`);
}

async function statusCounts(db: TestDatabase): Promise<Record<string, number>> {
  const rows = await db.query(`select status, count(*)::int as n from ai_runs group by status`);
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

/** Every claim after the first must follow a transition that took the run out of `running`. */
async function expectNoOverlappingLeases(db: TestDatabase): Promise<void> {
  const bad = await db.query(`
    with e as (
      select run_id, event_type, epoch,
             lag(event_type) over (partition by run_id order by id) as prev_type,
             lag(epoch) over (partition by run_id order by id) as prev_epoch
        from ai_events)
    select * from e
     where event_type = 'run.claimed' and epoch > 1
       and not (prev_type in ('run.retry_scheduled', 'run.released', 'run.reconciled') and prev_epoch = epoch - 1)`);
  expect(bad).toEqual([]);
  const owners = await db.query(`
    select run_id, epoch, count(*)::int as claims, count(distinct payload->>'workerId')::int as owners
      from ai_events where event_type = 'run.claimed' group by run_id, epoch having count(*) <> 1`);
  expect(owners).toEqual([]);
}

describe('workers across OS processes', () => {
  let db: TestDatabase;
  const workers: WorkerProcess[] = [];
  const spawn = (env: Record<string, string> = {}) => {
    const w = spawnWorker({ DB_URL: db.url, ...env });
    workers.push(w);
    return w;
  };

  beforeEach(async () => {
    db = await createTestDatabase('workers');
    await prepareWorkerSchema(db.url);
  });
  afterEach(async () => {
    for (const w of workers.splice(0)) {
      w.child.kill('SIGKILL');
      await w.exited;
    }
    await db?.drop();
  });

  it('4 worker processes drive 500 runs to success with one owner per (run, epoch)', async () => {
    await insertRuns(db, 500);
    const ws = [spawn(), spawn(), spawn(), spawn()];
    await Promise.all(ws.map((w) => w.ready));
    await waitFor(async () => (await statusCounts(db)).succeeded === 500, 120_000, '500 runs to succeed');
    const perStep = await db.query(
      `select count(*)::int as n from step_effects group by run_id, step having count(*) <> 1`,
    );
    expect(perStep).toEqual([]); // no crash here, so every step ran exactly once
    const [{ n }] = await db.query(`select count(*)::int as n from step_effects`);
    expect(n).toBe(500 * 9);
    const byWorker = await db.query(
      `select payload->>'workerId' as w, count(*)::int as n from ai_events where event_type = 'run.claimed' group by 1`,
    );
    expect(byWorker.length).toBe(4); // the load was shared
    await expectNoOverlappingLeases(db);
  }, 180_000);

  it('SIGKILL of a worker mid-run: its runs resume elsewhere within lease TTL + reconciler period', async () => {
    const ids = await insertRuns(db, 8);
    // Slow steps (9 × 1 s per run) so that worker A cannot finish a run while worker B boots.
    const a = spawn({ STEP_DELAY_MS: '1000', CONCURRENCY: '8' });
    await a.ready;
    await waitFor(async () => (await statusCounts(db)).running === 8, 20_000, 'worker A to hold all 8 runs');
    const b = spawn({ STEP_DELAY_MS: '50' });
    await b.ready;
    const killedAt = Date.now();
    a.child.kill('SIGKILL');
    await a.exited;
    const orphaned = (await db.query(`select id from ai_runs where status = 'running'`)).map((r) => r.id);
    expect(orphaned.length).toBeGreaterThan(0);
    await waitFor(
      async () => {
        const [{ n }] = await db.query(
          `select count(distinct run_id)::int as n from ai_events
            where event_type = 'run.claimed' and epoch = 2 and run_id = any($1)`,
          [orphaned],
        );
        return n === orphaned.length;
      },
      20_000,
      'every orphaned run to be claimed again',
    );
    const resumeMs = Date.now() - killedAt;
    // lease TTL 1500 + reconciler 200 + backoff ≤ 100 + poll 100, plus process scheduling slack.
    console.log(`resume after SIGKILL: ${resumeMs} ms (bound 4000 ms)`);
    expect(resumeMs).toBeLessThan(4000);
    await waitFor(async () => (await statusCounts(db)).succeeded === 8, 60_000, 'the 8 runs to succeed');
    const reconciled = await db.query(
      `select count(*)::int as n from ai_events where event_type = 'run.reconciled' and run_id = any($1)`,
      [ids],
    );
    expect(reconciled[0].n).toBe(orphaned.length);
    await expectNoOverlappingLeases(db);
  }, 120_000);

  it('the zombie: a SIGSTOPped worker loses its runs, and after SIGCONT none of its writes land', async () => {
    const [id] = await insertRuns(db, 1);
    const a = spawn({ STEP_DELAY_MS: '1000', LEASE_TTL_MS: '1500', HEARTBEAT_MS: '400' });
    await a.ready;
    await waitFor(
      async () => (await db.query(`select 1 from step_effects where run_id = $1`, [id])).length > 0,
      20_000,
      'worker A to make progress',
    );
    a.child.kill('SIGSTOP');
    const [{ epoch: zombieEpoch }] = await db.query(`select epoch from ai_runs where id = $1`, [id]);
    const b = spawn({ STEP_DELAY_MS: '1000' });
    await b.ready;
    await waitFor(
      async () =>
        Number((await db.query(`select epoch from ai_runs where id = $1`, [id]))[0].epoch) >
        Number(zombieEpoch),
      20_000,
      'worker B to take over',
    );
    const [{ t: takeover }] = await db.query(
      `select max(created_at) as t from ai_events where run_id = $1 and event_type = 'run.claimed'`,
      [id],
    );
    a.child.kill('SIGCONT');
    await waitFor(
      async () =>
        (await db.query(`select status from ai_runs where id = $1`, [id]))[0].status === 'succeeded',
      60_000,
      'the run to succeed under worker B',
    );
    await new Promise((r) => setTimeout(r, 1500)); // give the zombie time to try its writes
    const late = await db.query(
      `select event_type from ai_events where run_id = $1 and epoch = $2 and created_at > $3`,
      [id, zombieEpoch, takeover],
    );
    expect(late).toEqual([]);
    const lateCps = await db.query(
      `select step_index from ai_checkpoints where run_id = $1 and epoch = $2 and created_at > $3`,
      [id, zombieEpoch, takeover],
    );
    expect(lateCps).toEqual([]);
    await expectNoOverlappingLeases(db);
  }, 120_000);

  it('a drain longer than the lease keeps heartbeating: no other worker takes a run still being driven', async () => {
    await insertRuns(db, 2);
    const env = { STEP_DELAY_MS: '2500', LEASE_TTL_MS: '1500', HEARTBEAT_MS: '300', DRAIN_MS: '4000' };
    const a = spawn(env);
    await a.ready;
    await waitFor(async () => (await statusCounts(db)).running === 2, 20_000, 'worker A to hold both runs');
    await new Promise((r) => setTimeout(r, 300)); // A is inside a 2.5 s step
    const b = spawn({ ...env, STEP_DELAY_MS: '10' });
    await b.ready;
    a.child.kill('SIGTERM'); // A finishes its steps within the 4 s drain, far past the 1.5 s lease
    await a.exited;
    await waitFor(async () => (await statusCounts(db)).succeeded === 2, 60_000, 'both runs to succeed');
    const twice = await db.query(
      `select run_id, step, count(distinct pid)::int as processes from step_effects group by 1, 2 having count(*) > 1`,
    );
    expect(twice).toEqual([]); // no step body ran in both the draining worker and its successor
    await expectNoOverlappingLeases(db);
  }, 90_000);

  it('SIGTERM drains: runs whose calls settled within the grace are released and resumed by another worker at once', async () => {
    await insertRuns(db, 3);
    const a = spawn({ STEP_DELAY_MS: '600', LEASE_TTL_MS: '30000', HEARTBEAT_MS: '5000', DRAIN_MS: '3000' });
    await a.ready;
    await waitFor(async () => (await statusCounts(db)).running === 3, 20_000, 'worker A to hold 3 runs');
    const b = spawn({ STEP_DELAY_MS: '10', LEASE_TTL_MS: '30000', HEARTBEAT_MS: '5000' });
    await b.ready;
    // The premise: A is mid-run (9 steps of 600 ms) when it is told to stop, whatever B's boot took.
    expect(await statusCounts(db)).toEqual({ running: 3 });
    const termAt = Date.now();
    a.child.kill('SIGTERM'); // each run's 600 ms step ends within the grace; the run stops at its boundary
    await claimedAgain(db, 3, 10_000);
    const resumeMs = Date.now() - termAt;
    console.log(`resume after SIGTERM drain (calls settled in the grace): ${resumeMs} ms (bound 2000 ms)`);
    expect(resumeMs).toBeLessThan(2000);
    const exit = await a.exited;
    // Nest closes the app on SIGTERM, then re-raises the signal so the process ends by it.
    expect(exit).toEqual({ code: null, signal: 'SIGTERM' });
    const released = await db.query(`select payload from ai_events where event_type = 'run.released'`);
    expect(released.map((r) => r.payload.callInFlight)).toEqual([false, false, false]);
    await waitFor(async () => (await statusCounts(db)).succeeded === 3, 30_000, 'the 3 runs to succeed');
    await expectNoOverlappingLeases(db);
  }, 90_000);

  it('SIGTERM drains: a run whose call outlives the grace is due only at its lease deadline, never beside the call', async () => {
    await insertRuns(db, 3);
    const ttl = 3000;
    const env = { LEASE_TTL_MS: String(ttl), HEARTBEAT_MS: '500', DRAIN_MS: '300' };
    const a = spawn({ ...env, STEP_DELAY_MS: '4000' });
    await a.ready;
    await waitFor(async () => (await statusCounts(db)).running === 3, 20_000, 'worker A to hold 3 runs');
    const b = spawn({ ...env, STEP_DELAY_MS: '10' });
    await b.ready;
    // The premise, whatever B's boot took: each run of A is early in a 4 s step body (its last
    // checkpoint, or its claim, under 2 s ago), so no body can end within the grace, even one stretched
    // by a loaded machine. (A SIGTERM in a body's last moments lets it end and the run stop at its
    // boundary with nothing in flight: CI saw that once.)
    await waitFor(
      async () => {
        const rows = await db.query(`
          select extract(epoch from clock_timestamp() - greatest(
                   (select max(c.created_at) from ai_checkpoints c where c.run_id = r.id),
                   (select max(e.created_at) from ai_events e
                     where e.run_id = r.id and e.event_type = 'run.claimed'))) * 1000 as ms
            from ai_runs r where r.status = 'running'`);
        return rows.length === 3 && rows.every((r: { ms: string }) => Number(r.ms) < 2000);
      },
      30_000,
      "each of A's runs early in a step body",
    );
    const termAt = Date.now();
    a.child.kill('SIGTERM'); // 4 s step bodies, a 300 ms grace: every run has a call in flight
    await claimedAgain(db, 3, 20_000);
    const resumeMs = Date.now() - termAt;
    console.log(`resume after SIGTERM drain (calls in flight): ${resumeMs} ms (lease ${ttl} ms)`);
    const released = await db.query(`select payload from ai_events where event_type = 'run.released'`);
    expect(released.map((r) => r.payload.callInFlight)).toEqual([true, true, true]);
    // The lease was last renewed at most one heartbeat before the release: the takeover waits for it.
    const early = await db.query(`
      select c.run_id from ai_events c
        join ai_events r on r.run_id = c.run_id and r.event_type = 'run.released' and r.epoch = 1
       where c.event_type = 'run.claimed' and c.epoch = 2
         and c.created_at < r.created_at + interval '${ttl - 500 - 300} milliseconds'`);
    expect(early).toEqual([]);
    expect(resumeMs).toBeGreaterThanOrEqual(ttl - 500 - 300);
    await a.exited;
    await waitFor(async () => (await statusCounts(db)).succeeded === 3, 30_000, 'the 3 runs to succeed');
    await expectNoOverlappingLeases(db);
  }, 90_000);
});
