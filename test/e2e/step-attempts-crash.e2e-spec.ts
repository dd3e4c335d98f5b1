/**
 * A step's retry policy counts its attempts across claims: the worker SIGKILLed in the backoff between
 * two failed attempts (a real OS process, test/fixtures/retry-workflows.ts), the next claim makes only
 * the attempts that are left; one killed after the last failure was recorded runs the step no more.
 * Every execution of a step's body is a row of `step_effects`, written by the dying process itself.
 */
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { spawnWorker, waitFor, WorkerProcess } from '../helpers/processes';
import { prepareWorkerSchema } from '../helpers/schema';
import { TRAIL } from '../helpers/event-trail';

const DELAY_MS = 2500; // the backoff between two attempts: the kill lands in it

describe('step attempts counted across claims (a real process kill)', () => {
  let db: TestDatabase;
  const workers: WorkerProcess[] = [];
  const env = () => ({ DB_URL: db.url, RETRIES: '1', RETRY_DELAY_MS: String(DELAY_MS) });

  beforeAll(async () => {
    db = await createTestDatabase('stepattempts');
    await prepareWorkerSchema(db.url);
  });
  afterAll(async () => {
    for (const w of workers) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.exited));
    await db?.drop();
  });

  const worker = async () => {
    const w = spawnWorker(env());
    workers.push(w);
    await w.ready;
    return w;
  };
  const start = async (kind: string, input: object = {}) =>
    (
      await db.query<{ id: string }>(`insert into ai_runs (kind, input) values ($1, $2) returning id`, [
        kind,
        JSON.stringify(input),
      ])
    )[0].id;
  const executions = async (id: string) =>
    Number((await db.query(`select count(*) as n from step_effects where run_id = $1`, [id]))[0].n);
  const run = async (id: string) =>
    (await db.query(`select status, error, output from ai_runs where id = $1`, [id]))[0];
  const settled = (id: string, status: string) =>
    waitFor(async () => (await run(id)).status === status, 30_000, `run ${id} ${status}`);
  const recordedFailure = async (id: string) =>
    (
      await db.query(`select output from ai_checkpoints where run_id = $1 and step_name = 'always_fails'`, [
        id,
      ])
    )[0]?.output;

  /** Kills `w` once `n` executions ran and the n-th failure is recorded in the step's cursor. */
  const killAfterFailure = async (w: WorkerProcess, id: string, n: number) => {
    await waitFor(async () => (await executions(id)) >= n, 20_000, `${n} executions`);
    const counted = async () =>
      (await db.query(`select cursor->'failures'->>'count' as n from ai_runs where id = $1`, [id]))[0].n ===
      String(n);
    // Recorded within a moment (a claim that does not record it runs the step afresh: the test says so).
    await waitFor(counted, 1500, `failure ${n} recorded`).catch(() => undefined);
    w.child.kill('SIGKILL');
    expect((await w.exited).signal).toBe('SIGKILL');
    expect(await executions(id)).toBe(n);
  };

  it('always failing, killed after its second failed attempt: one more attempt, then the run fails as without the kill', async () => {
    const first = await worker();
    const id = await start('retry-spent');
    await killAfterFailure(first, id, 2);

    const heir = await worker();
    await settled(id, 'failed');
    expect(await executions(id)).toBe(3); // 2 + 1, not 2 + 3
    const effects = await db.query(`select pid from step_effects where run_id = $1 order by id`, [id]);
    expect(effects.map((e) => e.pid)).toEqual([first.child.pid, first.child.pid, heir.child.pid]);

    // The same run without a kill: the same three executions, the same outcome and recorded failure.
    const control = await start('retry-spent');
    await settled(control, 'failed');
    expect(await executions(control)).toBe(3);
    expect((await run(id)).error).toMatchObject({
      name: 'NonRetryableError',
      message: 'gave up: UpstreamError upstream unavailable (status 503, E0)',
    });
    expect((await run(id)).error.message).toBe((await run(control)).error.message);
    const [killed, clean] = [await recordedFailure(id), await recordedFailure(control)];
    expect(killed).toMatchObject({ name: 'UpstreamError', message: 'upstream unavailable' });
    expect({ ...killed, stack: undefined }).toEqual({ ...clean, stack: undefined });
    const trail = await db.query(`select event_type, payload from ${TRAIL} t where run_id = $1 order by id`, [
      id,
    ]);
    expect(trail.filter((e) => e.event_type === 'step.failed')).toHaveLength(1);
    expect(trail.filter((e) => e.event_type === 'run.failed')).toMatchObject([
      { payload: { reason: 'non_retryable' } },
    ]);
    heir.child.kill('SIGTERM');
    await heir.exited;
  }, 120_000);

  it('failing twice then succeeding, killed between: three executions in all, the run succeeds', async () => {
    const first = await worker();
    const id = await start('retry-heals');
    await killAfterFailure(first, id, 2);

    const heir = await worker();
    await settled(id, 'succeeded');
    expect(await executions(id)).toBe(3);
    const done = await run(id);
    expect(done.output).toEqual({ n: 3 });
    const [{ cursor }] = await db.query(`select cursor from ai_runs where id = $1`, [id]);
    expect(cursor.failures).toBeUndefined(); // the commit dropped the count
    heir.child.kill('SIGTERM');
    await heir.exited;
  }, 120_000);

  it('killed after its last failed attempt was recorded: the step fails from the record, not run again', async () => {
    const first = await worker();
    // The workflow holds 4 s after catching the failure: its record is not written yet.
    const id = await start('retry-spent', { holdMs: 4000 });
    await waitFor(async () => (await executions(id)) >= 3, 20_000, '3 executions');
    await killAfterFailure(first, id, 3);

    const heir = await worker();
    await settled(id, 'failed');
    expect(await executions(id)).toBe(3);
    expect((await run(id)).error).toMatchObject({
      message: 'gave up: UpstreamError upstream unavailable (status 503, E0)',
    });
    expect(await recordedFailure(id)).toMatchObject({ name: 'UpstreamError', fields: { status: 503 } });
    heir.child.kill('SIGTERM');
    await heir.exited;
  }, 120_000);
});
