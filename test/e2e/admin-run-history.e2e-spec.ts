import { createHash } from 'node:crypto';
import { INestApplication } from '@nestjs/common';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import type { Browser } from 'playwright-core';
import { DurableWorkflow, InvalidArgumentError, RedactHook, RunContext, RunRepository } from '../../src';
import { DurableAdminModule } from '../../src/admin';
import { bootApp, bootHttpApp } from '../helpers/app';
import { describeWithBrowser, launchChromium } from '../helpers/browser';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { DurableWorker } from '../../src/engine/worker.service';

/**
 * A run with a long history (5,000 events, 2,500 checkpoints, inserted with SQL): its detail shows only
 * the newest of them, keyset pages give back every one exactly once in order (both ways), `changes`
 * answers whether anything happened since a token without reading run data, the `redact` hook applies
 * to paged items as to the detail, and the inspector's live view polls `changes` and fetches only the
 * new events.
 */
const SECRET = 'sk_live_PAGED_SECRET_77';
const EVENTS = 5000;
const CHECKPOINTS = 2500;

const SECRET_OR_MARK = new RegExp(`${SECRET}|\\[hidden:[a-z._:$]+\\]`, 'g');
const hide = (v: unknown, mark: string): unknown => {
  if (typeof v === 'string') return v.replace(SECRET_OR_MARK, mark);
  if (Array.isArray(v)) return v.map((x) => hide(x, mark));
  if (v && typeof v === 'object')
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, hide(x, mark)]));
  return v;
};
const redact: RedactHook = (key, value) => hide(value, `[hidden:${key}]`);

@DurableWorkflow('long-history')
class LongHistoryWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    return ctx.waitForSignal('go');
  }
}

@DurableWorkflow('history-streamer')
class StreamerWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    await ctx.emit('begin', { of: 'work' });
    const more = await ctx.waitForSignal<{ label: string }>('more');
    await ctx.emit('progress', { label: more.label });
    await ctx.waitForSignal('finish');
    await ctx.emit('end', { ok: true });
    return { ok: true };
  }
}

const boot = (url: string, withHook: boolean) =>
  bootHttpApp(url, {
    options: withHook ? { redact } : {},
    imports: [DurableAdminModule.forRoot({ path: 'durable', allowAnonymous: true, observability: false })],
    providers: [LongHistoryWorkflow],
  });

describe('admin API: a run with a long history', () => {
  let db: TestDatabase;
  let plain: { app: INestApplication; http: string };
  let hooked: { app: INestApplication; http: string };
  let runs: RunRepository;

  const get = async (path: string, app = plain) => {
    const res = await fetch(`${app.http}/durable${path}`);
    const text = await res.text();
    return { status: res.status, bytes: Buffer.byteLength(text), body: JSON.parse(text), text };
  };
  const fields = (body: any) => (body.errors as Array<{ field: string }>).map((e) => e.field).sort();

  /** A pending run with EVENTS events (after its run.created) and CHECKPOINTS checkpoints (one `$signal:go`), the secret in many. */
  const seededRun = async (): Promise<string> => {
    const { run } = await runs.start('long-history', {});
    await db.query(
      `insert into ai_events (run_id, event_type, epoch, payload)
       select $1, case when i % 2 = 0 then 'model.call_started' else 'run.checkpoint_saved' end, 1 + i / 1000,
              jsonb_build_object('step', i / 2, 'name', 'answer-' || (i / 2), 'kind', 'model', 'note', $2::text,
                                 'usage', jsonb_build_object('prompt_tokens', 1200, 'completion_tokens', 80))
         from generate_series(0, ${EVENTS - 1}) i`,
      [run.id, `seen ${SECRET}`],
    );
    await db.query(
      `insert into ai_checkpoints (run_id, step_index, step_name, output, attempt, epoch, meta)
       select $1, i, case when i = 7 then '$signal:go' else 'answer-' || i end,
              case when i = 7 then jsonb_build_object('payload', jsonb_build_object('s', $2::text))
                   else jsonb_build_object('text', repeat('lorem ipsum ', 8) || $2::text, 'i', i) end,
              0, 1 + i / 500, jsonb_build_object('usage', jsonb_build_object('prompt_tokens', 1200))
         from generate_series(0, ${CHECKPOINTS - 1}) i`,
      [run.id, SECRET],
    );
    return run.id;
  };
  const eventIds = async (id: string) =>
    (await db.query(`select id from ai_events where run_id = $1 order by id`, [id])).map((r) => Number(r.id));

  /** Every item of a paged endpoint, following `next` from `first` with the parameter `param`. */
  const pageAll = async (path: string, param: 'after' | 'before', first: string, limit: number) => {
    const items: any[] = [];
    let cursor: string | undefined = first;
    let pages = 0;
    while (cursor !== undefined) {
      const page = await get(`${path}?limit=${limit}${cursor ? `&${param}=${cursor}` : ''}`);
      expect(page.status).toBe(200);
      expect(page.body.items.length).toBeLessThanOrEqual(limit);
      items.push(...page.body.items);
      cursor = page.body.next === undefined ? undefined : String(page.body.next);
      pages++;
    }
    return { items, pages };
  };

  beforeAll(async () => {
    db = await createTestDatabase('admin_history');
    plain = await boot(db.url, false);
    hooked = await boot(db.url, true);
    runs = plain.app.get(RunRepository);
  });
  afterAll(async () => {
    await hooked?.app.close();
    await plain?.app.close();
    await db?.drop();
  });

  it('shows the newest 200 events and checkpoints in the detail, with cursors to older ones', async () => {
    const id = await seededRun();
    const ids = await eventIds(id);
    const detail = await get(`/api/runs/${id}`);
    expect(detail.status).toBe(200);
    const d = detail.body;
    expect(d.limit).toBe(200);
    expect(d.events.map((e: { id: number }) => e.id)).toEqual(ids.slice(-200)); // newest, oldest first
    expect(d.eventsBefore).toBe(ids[ids.length - 200]);
    expect(d.checkpoints.map((c: { stepIndex: number }) => c.stepIndex)).toEqual(
      Array.from({ length: 200 }, (_, i) => CHECKPOINTS - 200 + i),
    );
    expect(d.checkpointsBefore).toBe(CHECKPOINTS - 200);
    expect(d.token).toMatch(/^\d+\.\d+$/);
    // The timeline is built from what is shown: the first epoch shown began before it.
    expect(d.timeline.epochs[0].start).toBe('earlier');
    expect(d.timeline.steps.every((s: { state: string }) => s.state === 'done')).toBe(true);
    // Bounded: a few hundred kB, whatever the history (the whole record was ~4 MB before paging).
    expect(detail.bytes).toBeLessThan(400_000);
    console.log(`detail of a ${EVENTS}-event run: ${detail.bytes} bytes`);

    const small = await get(`/api/runs/${id}?limit=5`);
    expect(small.body.events).toHaveLength(5);
    expect(small.body.checkpoints).toHaveLength(5);
    expect(small.body.eventsBefore).toBe(ids[ids.length - 5]);

    const page = await fetch(`${plain.http}/durable/runs/${id}`).then((r) => r.text());
    expect(page).toContain('data-testid="older-events"');
    expect(page).toContain(`events?before=${d.eventsBefore}`);
    expect(page).toContain('data-testid="older-checkpoints"');
    expect(Buffer.byteLength(page)).toBeLessThan(400_000);
    console.log(`inspector page of a ${EVENTS}-event run: ${Buffer.byteLength(page)} bytes`);
  });

  it('pages every event and checkpoint exactly once, in order, forwards and backwards', async () => {
    const id = await seededRun();
    const ids = await eventIds(id);
    expect(ids).toHaveLength(EVENTS + 1); // and run.created

    const forwards = await pageAll(`/api/runs/${id}/events`, 'after', '', 500);
    expect(forwards.items.map((e) => e.id)).toEqual(ids);
    expect(forwards.pages).toBe(EVENTS / 500 + 1);
    expect(forwards.items[1]).toMatchObject({ runId: id, type: 'model.call_started', epoch: 1 });

    // Back from the detail's cursor: with the detail's own events, the whole trail, newest first.
    const detail = (await get(`/api/runs/${id}?limit=100`)).body;
    const backwards = await pageAll(`/api/runs/${id}/events`, 'before', String(detail.eventsBefore), 300);
    const all = [...backwards.items.map((e) => e.id).reverse(), ...detail.events.map((e: any) => e.id)];
    expect(all).toEqual(ids);

    const cps = await pageAll(`/api/runs/${id}/checkpoints`, 'after', '', 450);
    expect(cps.items.map((c) => c.stepIndex)).toEqual(Array.from({ length: CHECKPOINTS }, (_, i) => i));
    const cpsBack = await pageAll(`/api/runs/${id}/checkpoints`, 'before', String(CHECKPOINTS), 500);
    expect(cpsBack.items.map((c) => c.stepIndex)).toEqual(
      Array.from({ length: CHECKPOINTS }, (_, i) => CHECKPOINTS - 1 - i),
    );
    const after = await get(`/api/runs/${id}/events?after=${ids.at(-3)}`);
    expect(after.body).toEqual({
      items: [expect.objectContaining({ id: ids.at(-2) }), expect.anything()],
    });
    expect((await get(`/api/runs/${id}/events?after=${ids.at(-1)}`)).body).toEqual({ items: [] });

    // The same paging on RunRepository, for the app's own code; without options, everything as before.
    expect((await runs.events(id)).map((e) => e.id)).toEqual(ids);
    expect((await runs.events(id, { after: ids[9], limit: 3 })).map((e) => e.id)).toEqual(ids.slice(10, 13));
    expect((await runs.events(id, { before: ids[9], limit: 2 })).map((e) => e.id)).toEqual([ids[8], ids[7]]);
    expect((await runs.events(id, { newestFirst: true, limit: 1 }))[0].id).toBe(ids.at(-1));
    expect((await runs.checkpoints(id)).length).toBe(CHECKPOINTS);
    expect((await runs.checkpoints(id, { after: 2497 })).map((c) => c.stepIndex)).toEqual([2498, 2499]);
    const refused = async (q: object) => runs.events(id, q).catch((e: InvalidArgumentError) => e.field);
    expect(await refused({ after: -1 })).toBe('after');
    expect(await refused({ after: 1, before: 5 })).toBe('before');
    expect(await refused({ after: 1, newestFirst: true })).toBe('newestFirst');
    expect(await refused({ limit: 1001 })).toBe('limit');
    expect(await refused({ before: 1.5 })).toBe('before');
  });

  it('answers 400 naming each bad parameter, 404 for an unknown run', async () => {
    const id = await seededRun();
    const bad = await get(`/api/runs/${id}/events?after=-1&limit=0&x=1`);
    expect(bad.status).toBe(400);
    expect(fields(bad.body)).toEqual(['after', 'limit', 'x']);
    const both = await get(`/api/runs/${id}/checkpoints?after=1&before=5`);
    expect(both.status).toBe(400);
    expect(fields(both.body)).toEqual(['before']);
    expect(both.body.errors[0].messages).toEqual(['before cannot be given with after']);
    expect(fields((await get(`/api/runs/${id}/events?before=abc&limit=501`)).body)).toEqual([
      'before',
      'limit',
    ]);
    expect(fields((await get(`/api/runs/${id}/events?after=1e30`)).body)).toEqual(['after']);
    expect(fields((await get(`/api/runs/${id}?limit=9999`)).body)).toEqual(['limit']);
    expect(fields((await get(`/api/runs/${id}/changes?since=not-a-token`)).body)).toEqual(['since']);
    expect(fields((await get(`/api/runs/42/events`)).body)).toEqual(['id']);
    const unknown = '00000000-0000-4000-8000-000000000000';
    for (const p of ['events', 'checkpoints', 'changes']) {
      const res = await get(`/api/runs/${unknown}/${p}`);
      expect({ p, status: res.status, code: res.body.code }).toEqual({
        p,
        status: 404,
        code: 'DURABLE_RUN_NOT_FOUND',
      });
    }
  });

  it('says whether the run changed since a token: a new event, a cursor move, a status change', async () => {
    const id = await seededRun();
    const first = await get(`/api/runs/${id}/changes`);
    expect(first.status).toBe(200);
    expect(Object.keys(first.body).sort()).toEqual(['changed', 'lastEventId', 'status', 'token']); // no run data
    expect(first.body).toMatchObject({ changed: true, status: 'pending' });
    const token = first.body.token;
    expect((await get(`/api/runs/${id}`)).body.token).toBe(token); // the detail's token is the same
    expect((await get(`/api/runs/${id}/changes?since=${token}`)).body).toEqual({
      ...first.body,
      changed: false,
    });

    await runs.signal(id, 'go', { s: 1 }, 'tester'); // an event (and the row touched)
    const signalled = (await get(`/api/runs/${id}/changes?since=${token}`)).body;
    expect(signalled).toMatchObject({ changed: true, status: 'pending' });
    expect(signalled.lastEventId).toBeGreaterThan(first.body.lastEventId);
    expect((await get(`/api/runs/${id}/events?after=${first.body.lastEventId}`)).body.items).toMatchObject([
      { type: 'signal.sent', payload: { name: 'go', by: 'tester' } },
    ]);
    expect((await get(`/api/runs/${id}/changes?since=${signalled.token}`)).body.changed).toBe(false);

    // A row change that writes no event (as ctx.progress does) is a change too.
    await db.query(`update ai_runs set cursor = jsonb_set(cursor, '{item}', '3') where id = $1`, [id]);
    const moved = (await get(`/api/runs/${id}/changes?since=${signalled.token}`)).body;
    expect(moved).toMatchObject({ changed: true, lastEventId: signalled.lastEventId });

    await runs.cancel(id, 'enough');
    const cancelled = (await get(`/api/runs/${id}/changes?since=${moved.token}`)).body;
    expect(cancelled).toMatchObject({ changed: true, status: 'cancelled' });
  });

  it('applies the redact hook to paged events and checkpoints exactly as to the detail', async () => {
    const id = await seededRun();
    const plainPage = await get(`/api/runs/${id}/events?limit=50`);
    expect(plainPage.text).toContain(SECRET); // stored intact: the check below can fail
    const paths = [
      `/api/runs/${id}`,
      `/api/runs/${id}/events?limit=500`,
      `/api/runs/${id}/events?before=${Number.MAX_SAFE_INTEGER}&limit=500`,
      `/api/runs/${id}/checkpoints?limit=500`,
      `/api/runs/${id}/checkpoints?before=10`,
      `/api/runs/${id}/changes`,
      `/runs/${id}`,
    ];
    for (const p of paths) {
      const res = await fetch(`${hooked.http}/durable${p}`);
      const text = await res.text();
      expect({ p, status: res.status, leaked: text.includes(SECRET) }).toEqual({
        p,
        status: 200,
        leaked: false,
      });
    }
    const events = (await get(`/api/runs/${id}/events?limit=2`, hooked)).body.items; // run.created, then ours
    const detail = (await get(`/api/runs/${id}?limit=2`, hooked)).body;
    expect(events[1].payload.note).toBe('seen [hidden:model.call_started]');
    expect(detail.events[1].payload.note).toBe('seen [hidden:run.checkpoint_saved]');
    const cps = (await get(`/api/runs/${id}/checkpoints?before=8&limit=2`, hooked)).body.items;
    expect(cps.map((c: any) => c.output)).toEqual([
      { payload: { s: '[hidden:signal.payload]' } },
      { text: `${'lorem ipsum '.repeat(8)}[hidden:checkpoint.output]`, i: 6 },
    ]);
    expect(detail.checkpoints[1].output.text).toContain('[hidden:checkpoint.output]');
  });

  it("pages a run's commands: the newest in the detail, with every older one an operator must decide", async () => {
    const { run } = await runs.start('long-history', {});
    const COMMANDS = 600;
    await db.query(
      `insert into ai_commands (idempotency_key, run_id, step_index, command_name, payload, status, result, epoch)
       select 'run_' || $1 || ':step_' || i || ':send', $1::uuid, i, 'send',
              jsonb_build_object('to', 'c' || i, 'note', $2::text),
              case i when 3 then 'in_doubt' when 10 then 'awaiting_approval' else 'succeeded' end,
              case when i in (3, 10) then null else jsonb_build_object('sent', i) end, 1
         from generate_series(0, ${COMMANDS - 1}) i`,
      [run.id, `for ${SECRET}`],
    );
    const steps = (items: Array<{ stepIndex: number }>) => items.map((c) => c.stepIndex);
    const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

    const d = (await get(`/api/runs/${run.id}?limit=100`)).body;
    // The newest 100, plus the two older ones that wait for an operator, in step order.
    expect(steps(d.commands)).toEqual([3, 10, ...range(500, 600)]);
    expect(d.commandsBefore).toBe(500);
    const all = await get(`/api/runs/${run.id}?limit=200`);
    expect(all.bytes).toBeLessThan(200_000);

    const forwards = await pageAll(`/api/runs/${run.id}/commands`, 'after', '', 250);
    expect(steps(forwards.items)).toEqual(range(0, COMMANDS));
    expect(forwards.pages).toBe(3);
    const back = await pageAll(`/api/runs/${run.id}/commands`, 'before', String(d.commandsBefore), 200);
    expect(steps(back.items)).toEqual(range(0, 500).reverse());
    expect(forwards.items[3]).toMatchObject({ status: 'in_doubt', name: 'send', payload: { to: 'c3' } });

    // The inspector links to the older ones and still offers the decisions on the old open commands.
    const page = await fetch(`${plain.http}/durable/runs/${run.id}`).then((r) => r.text());
    expect(page).toContain('data-testid="older-commands"');
    expect(page).toContain(`commands?before=${(await get(`/api/runs/${run.id}`)).body.commandsBefore}`);
    expect(page).toContain(`run_${run.id}:step_3:send`);
    expect(page).toContain(`run_${run.id}:step_10:send`);

    // Paged commands go through the redact hook like the detail's.
    expect((await get(`/api/runs/${run.id}/commands?limit=1`)).text).toContain(SECRET);
    for (const p of [`/api/runs/${run.id}/commands?limit=500`, `/api/runs/${run.id}`, `/runs/${run.id}`]) {
      const text = await fetch(`${hooked.http}/durable${p}`).then((r) => r.text());
      expect({ p, leaked: text.includes(SECRET) }).toEqual({ p, leaked: false });
    }
    const bad = await get(`/api/runs/${run.id}/commands?after=1&before=5&limit=9999`);
    expect(bad.status).toBe(400);
    expect(fields(bad.body)).toEqual(['before', 'limit']);
    expect((await get(`/api/runs/00000000-0000-4000-8000-000000000000/commands`)).status).toBe(404);
  });

  it('a run with thousands of open commands: the detail lists a bounded number, and one is settled without reading them all', async () => {
    const { run } = await runs.start('long-history', {});
    const OPEN = 2000;
    await db.query(
      `insert into ai_commands (idempotency_key, run_id, step_index, command_name, payload, status, epoch)
       select 'run_' || $1 || ':step_' || i || ':send', $1::uuid, i, 'send', jsonb_build_object('to', 'c' || i),
              'in_doubt', 1
         from generate_series(0, ${OPEN - 1}) i`,
      [run.id],
    );
    const d = await get(`/api/runs/${run.id}?limit=100`);
    // The newest 100, and the first 100 older ones that wait for an operator: 200, not 2,000.
    expect(d.body.commands).toHaveLength(200);
    expect(d.bytes).toBeLessThan(150_000);
    // Settling one reads that command by its key (the action's answer names it).
    const res = await fetch(`${plain.http}/durable/api/runs/${run.id}/resolve`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ key: `run_${run.id}:step_1500:send`, outcome: 'failed', error: 'never sent' }),
    });
    expect(res.status).toBe(200);
    const settled = await db.query(`select status from ai_commands where idempotency_key = $1`, [
      `run_${run.id}:step_1500:send`,
    ]);
    expect(settled).toEqual([{ status: 'failed' }]);
    const other = await fetch(`${plain.http}/durable/api/runs/${run.id}/resolve`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ key: 'run_00000000-0000-4000-8000-000000000000:step_1:send', outcome: 'retry' }),
    });
    expect(other.status).toBe(404); // a key of no command of this run
  });

  it('the inspector page reads no checkpoint output (it shows none): a run of 50 × 200 KB outputs stays unread', async () => {
    const { run } = await runs.start('long-history', {});
    await db.query(
      `insert into ai_checkpoints (run_id, step_index, step_name, output, attempt, epoch)
       select $1, i, 'big', jsonb_build_object('blob', repeat('x', 200000)), 0, 1 from generate_series(0, 49) i`,
      [run.id],
    );
    const withOutputs = jest.spyOn(plain.app.get(RunRepository), 'checkpoints');
    try {
      const page = await fetch(`${plain.http}/durable/runs/${run.id}`);
      expect(page.status).toBe(200);
      const html = await page.text();
      expect(html).toContain('big');
      expect(html.length).toBeLessThan(200_000);
      expect(withOutputs).not.toHaveBeenCalled();
    } finally {
      withOutputs.mockRestore();
    }
    // The API's detail shows each as a marker (over limits.maxShownValueBytes); its route answers it whole.
    const d = await get(`/api/runs/${run.id}?limit=2`);
    // Measured by PostgreSQL: `{"blob": "..."}`, one space more than JSON.stringify's 200,011 bytes.
    expect(d.body.checkpoints[0].output).toMatchObject({ $truncated: true, bytes: 200_012 });
    const whole = await get(`/${d.body.checkpoints[0].output.fetch}`);
    expect(whole.body.output.blob).toHaveLength(200_000);
  });

  it('documents the new endpoints in OpenAPI', () => {
    const doc = SwaggerModule.createDocument(plain.app, new DocumentBuilder().setTitle('t').build());
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/durable/api/runs/{id}/events',
        '/durable/api/runs/{id}/checkpoints',
        '/durable/api/runs/{id}/commands',
        '/durable/api/runs/{id}/changes',
      ]),
    );
    const params = (p: string) => (doc.paths[p].get!.parameters ?? []).map((x: any) => x.name).sort();
    expect(params('/durable/api/runs/{id}/events')).toEqual(['after', 'before', 'id', 'limit']);
    expect(params('/durable/api/runs/{id}/changes')).toEqual(['id', 'since']);
    expect(params('/durable/api/runs/{id}')).toEqual(['id', 'limit']);
  });

  describeWithBrowser('the inspector live view (headless Chromium)', () => {
    let browser: Browser;
    beforeAll(async () => {
      browser = await launchChromium();
    });
    afterAll(async () => {
      await browser?.close();
    });

    it('polls changes, appends only the new events, and reloads when the status changes', async () => {
      const id = await seededRun();
      const html = await fetch(`${plain.http}/durable/runs/${id}`);
      const text = await html.text();
      // The served script polls `changes` and fetches `events?after=`, and the CSP still allows it by hash.
      const script = /<script>([\s\S]*)<\/script>/.exec(text)![1];
      expect(script).toContain("'/changes?since='");
      expect(script).toContain("'/events?after='");
      const hash = createHash('sha256').update(script).digest('base64');
      expect(html.headers.get('content-security-policy')).toContain(`script-src 'sha256-${hash}'`);

      const page = await browser.newPage();
      const problems: string[] = [];
      page.on('pageerror', (err) => problems.push(err.message));
      page.on('console', (msg) => msg.type() === 'error' && problems.push(msg.text()));
      const requests: string[] = [];
      page.on('request', (r) => requests.push(new URL(r.url()).pathname + new URL(r.url()).search));
      await page.goto(`${plain.http}/durable/runs/${id}`);
      await page.getByTestId('run-status').waitFor();
      await page.evaluate(() => ((globalThis as any).sameDocument = true));
      const last = (await eventIds(id)).at(-1)!;
      expect(await page.locator('body').getAttribute('data-last-event')).toBe(String(last));

      await runs.signal(id, 'go', { n: 1 }, 'tester');
      await page.locator('[data-testid=live-event][data-type="signal.sent"]').waitFor({ timeout: 10_000 });
      expect(await page.evaluate(() => (globalThis as any).sameDocument)).toBe(true); // appended, not reloaded
      expect(requests).toContain(`/durable/api/runs/${id}/events?after=${last}&limit=200`);
      expect(requests.some((r) => r.startsWith(`/durable/api/runs/${id}/changes?since=`))).toBe(true);
      expect(requests.filter((r) => r === `/durable/api/runs/${id}`)).toEqual([]); // never the whole run

      await runs.cancel(id, 'done watching', 'tester');
      await page.getByTestId('run-status').filter({ hasText: 'cancelled' }).waitFor({ timeout: 10_000 });
      expect(await page.evaluate(() => (globalThis as any).sameDocument)).toBeUndefined(); // reloaded
      expect(problems).toEqual([]);
      await page.close();
    });

    it("follows the run's progress stream over SSE: entries written while the page is open appear once, in order", async () => {
      // A worker of its own, which registers only this kind (the seeded runs above do not replay).
      const streamer = await bootApp(db.url, [StreamerWorkflow]);
      const worker = streamer.get(DurableWorker);
      const drive = async () => {
        await worker.tick();
        await worker.idle();
      };
      const { run } = await streamer.get(RunRepository).start('history-streamer', {});
      await drive(); // emits `begin`, waits for `more`
      const page = await browser.newPage();
      const problems: string[] = [];
      page.on('pageerror', (err) => problems.push(err.message));
      page.on('console', (msg) => msg.type() === 'error' && problems.push(msg.text()));
      const requests: string[] = [];
      page.on('request', (r) => requests.push(new URL(r.url()).pathname));
      await page.goto(`${plain.http}/durable/runs/${run.id}`);
      await page.locator('#auto-refresh').uncheck(); // no reload: what appears comes from the stream
      const entries = page.getByTestId('stream-entry');
      await entries.first().waitFor({ timeout: 10_000 });
      await page.evaluate(() => ((globalThis as any).sameDocument = true));

      await runs.signal(run.id, 'more', { label: 'half way' });
      await drive();
      await page.locator('[data-testid=stream-entry][data-seq="2"]').waitFor({ timeout: 10_000 });
      await runs.signal(run.id, 'finish');
      await drive();
      await page.locator('[data-testid=stream-entry][data-seq="3"]').waitFor({ timeout: 10_000 });
      expect((await runs.get(run.id))!.status).toBe('succeeded');
      const rows = await entries.evaluateAll((trs) =>
        trs.map((tr) => (tr as unknown as { innerText: string }).innerText.split('\t')),
      );
      expect(rows.map((r) => [r[0], r[1], r[2]])).toEqual([
        ['1', 'begin', 'workflow'],
        ['2', 'progress', 'workflow'],
        ['3', 'end', 'workflow'],
      ]);
      expect(rows[1][3]).toContain('half way');
      expect(await page.evaluate(() => (globalThis as any).sameDocument)).toBe(true);
      expect(requests.filter((r) => r === `/durable/api/runs/${run.id}/stream`)).toHaveLength(1);
      expect(problems).toEqual([]);
      await page.close();
      await streamer.close();
    });
  });
});
