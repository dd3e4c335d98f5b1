import { INestApplication, Injectable } from '@nestjs/common';
import { DurableStep, DurableWorkflow, RedactHook, RunRepository } from '../../src';
import { DurableAdminModule } from '../../src/admin';
import { AdminRunsService } from '../../src/admin/admin-runs.service';
import { DurableDatabase } from '../../src/store/durable-database';
import { bootHttpApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { tickUntilStatus } from '../helpers/drive';

/**
 * Issue 36, part 5 (security review): one admin run-detail answer is bounded in bytes, not only in
 * count. A checkpoint output (or meta) over `limits.maxShownValueBytes` (its JSON after `redact`) is
 * shown as `{ $truncated: true, bytes, fetch }`, and `GET api/runs/:id/checkpoints/:stepIndex` answers
 * that checkpoint whole; a bad step index is a 400 naming it, a missing one a 404.
 *
 * Issue 46 part 4: the bound is on the work too. The sizes are measured in SQL and a value over the cap
 * is never read from the database, parsed, or handed to the `redact` hook.
 */
const BIG = 300_000; // characters of each large output: 12 of them are 3.6 MB

@Injectable()
class BigSteps {
  @DurableStep()
  async big(i: number) {
    return { i, blob: `${i}`.padEnd(BIG, 'x') };
  }

  @DurableStep()
  async small(i: number) {
    return { i, note: 'small' };
  }
}

@DurableWorkflow('big-outputs')
class BigOutputs {
  constructor(private readonly s: BigSteps) {}
  async run() {
    for (let i = 0; i < 12; i++) await this.s.big(i);
    return this.s.small(12);
  }
}

let db: TestDatabase;
let app: INestApplication;
let api: string;
let runId: string;
/** The JSON size of each value the redact hook was handed, by key. */
const redacted: Array<{ key: string; bytes: number }> = [];
const redact: RedactHook = (key, value) => {
  redacted.push({ key, bytes: Buffer.byteLength(JSON.stringify(value) ?? '') });
  return value;
};

beforeAll(async () => {
  db = await createTestDatabase('admin_detail_bytes');
  const booted = await bootHttpApp(db.url, {
    options: { redact },
    imports: [DurableAdminModule.forRoot({ allowAnonymous: true, observability: false })],
    providers: [BigSteps, BigOutputs],
  });
  app = booted.app;
  api = `${booted.http}/durable/api`;
  runId = (await app.get(RunRepository).start('big-outputs', {})).run.id;
  await tickUntilStatus(app, runId, 'succeeded');
}, 60_000);
afterAll(async () => {
  await app?.close();
  await db?.drop();
});

describe('a run detail bounded in bytes', () => {
  it('large checkpoint outputs are markers with their size and the route to fetch them; small ones whole', async () => {
    const res = await fetch(`${api}/runs/${runId}`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text.length).toBeLessThan(100_000); // 3.6 MB of outputs before
    const detail = JSON.parse(text) as { checkpoints: Array<{ stepIndex: number; output: any }> };
    expect(detail.checkpoints).toHaveLength(13);
    const [first] = detail.checkpoints;
    expect(first.output).toEqual({
      $truncated: true,
      // Measured by PostgreSQL (`octet_length(output::text)`): jsonb prints `{"i": 0, "blob": ...}`, 3 spaces more.
      bytes: Buffer.byteLength(JSON.stringify({ i: 0, blob: '0'.padEnd(BIG, 'x') })) + 3,
      fetch: `api/runs/${runId}/checkpoints/${first.stepIndex}`,
    });
    expect(detail.checkpoints[12].output).toEqual({ i: 12, note: 'small' });

    // The checkpoints pages are bounded the same way.
    const page = (await (await fetch(`${api}/runs/${runId}/checkpoints?limit=500`)).json()) as {
      items: Array<{ output: any }>;
    };
    expect(page.items[0].output).toMatchObject({ $truncated: true });

    // The marker's route answers the checkpoint whole.
    const one = await fetch(`${api.replace(/api$/, '')}${first.output.fetch}`);
    expect(one.status).toBe(200);
    expect(((await one.json()) as { output: unknown }).output).toEqual({ i: 0, blob: '0'.padEnd(BIG, 'x') });
  });

  it('never reads nor redacts a value over the cap: the rows the driver returned hold none of them', async () => {
    const database = app.get(DurableDatabase);
    const query = jest.spyOn(database, 'query');
    redacted.length = 0;
    try {
      for (const path of [`runs/${runId}`, `runs/${runId}/checkpoints?limit=500`]) {
        expect((await fetch(`${api}/${path}`)).status).toBe(200);
      }
      // The inspector page's read (no outputs) reads no output at all.
      const page = await app.get(AdminRunsService).detail(runId, undefined, false);
      expect(page.checkpoints.map((c) => c.output)).toEqual(Array(13).fill(null));
      const rows = await Promise.all(
        query.mock.results.map(async (r) => ((await r.value) as { rows?: unknown[] }).rows ?? []),
      );
      const returned = rows.flat().map((row) => Buffer.byteLength(JSON.stringify(row)));
      expect(returned.length).toBeGreaterThan(13);
      // 12 outputs of 300 KB each read twice (7.2 MB) before: now none of them.
      expect(Math.max(...returned)).toBeLessThan(64 << 10);
      expect(returned.reduce((a, b) => a + b, 0)).toBeLessThan(200_000);
    } finally {
      query.mockRestore();
    }
    const outputs = redacted.filter((r) => r.key === 'checkpoint.output');
    expect(outputs.length).toBeGreaterThan(0); // the small ones still go through the hook
    expect(Math.max(...redacted.map((r) => r.bytes))).toBeLessThan(64 << 10);
  });

  it('the checkpoint route: a bad step index is a 400 naming it; a missing step or run a 404', async () => {
    for (const bad of ['abc', '-1', '1e3', '1.5', '9999999999', '%20', '0x1']) {
      const res = await fetch(`${api}/runs/${runId}/checkpoints/${bad}`);
      expect({ bad, status: res.status }).toEqual({ bad, status: 400 });
      expect(((await res.json()) as { errors: unknown }).errors).toEqual([
        expect.objectContaining({ field: 'stepIndex' }),
      ]);
    }
    const missing = await fetch(`${api}/runs/${runId}/checkpoints/999`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ code: 'DURABLE_CHECKPOINT_NOT_FOUND' });
    const noRun = await fetch(`${api}/runs/00000000-0000-4000-8000-000000000000/checkpoints/0`);
    expect(noRun.status).toBe(404);
    expect(await noRun.json()).toMatchObject({ code: 'DURABLE_RUN_NOT_FOUND' });
  });
});
