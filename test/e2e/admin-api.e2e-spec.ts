import { CanActivate, ExecutionContext, INestApplication, Injectable, Type } from '@nestjs/common';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import {
  CommandContext,
  CommandFailedError,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  InvalidOptionsError,
  RunContext,
  RunRepository,
} from '../../src';
import { ApiKeyAdminGuard, DurableAdminModule, DurableAdminModuleOptions } from '../../src/admin';
import { bootHttpApp } from '../helpers/app';
import { DurableWorker } from '../../src/engine/worker.service';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';

/**
 * The admin REST API end to end over HTTP against real PostgreSQL: every endpoint, its 400s with
 * field errors, 401/403 from the guard, 404s (including another run's command key), 409s, and every
 * operator action visible in the run's event trail with who did it.
 */
const OPS_KEY = 'ops-key-0123456789abcdef';
const VIEW_KEY = 'view-key-0123456789abcdef';
let flakyBroken = true;
let failNextManualCharge = true;

@Injectable()
class OrderSteps {
  @DurableStep({ name: 'plan', kind: 'model' })
  async plan(ref: string) {
    return { ref, usage: { prompt_tokens: 1200, completion_tokens: 80 }, requestId: `req_${ref}` };
  }
}

@Injectable()
class Payments {
  @IdempotentCommand({
    name: 'charge',
    inDoubt: 'manual',
    requiresApproval: (a: { amount: number }) => a.amount > 100,
  })
  async charge(args: { amount: number }, ctx?: CommandContext) {
    if (args.amount === 13 && failNextManualCharge) {
      failNextManualCharge = false;
      throw new Error('socket hang up'); // the outcome is unknown: in doubt on resume
    }
    return { chargeId: `ch_${ctx!.idempotencyKey.slice(-12)}`, amount: args.amount };
  }
}

@DurableWorkflow('order', { maxAttempts: 3 })
class OrderWorkflow {
  constructor(
    private readonly steps: OrderSteps,
    private readonly payments: Payments,
  ) {}
  async run(input: { ref: string; amount: number }) {
    await this.steps.plan(input.ref);
    try {
      return { charged: await this.payments.charge({ amount: input.amount }) };
    } catch (err) {
      if (err instanceof CommandFailedError) return { declined: err.code };
      throw err;
    }
  }
}

@DurableWorkflow('flaky', { maxAttempts: 1 })
class FlakyWorkflow {
  async run() {
    if (flakyBroken) throw new Error('vendor down');
    return { ok: true };
  }
}

@DurableWorkflow('waiter')
class WaiterWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    return { got: await ctx.waitForSignal('go') };
  }
}

/** An app's own guard, resolved with DI: `x-role: ops` passes as carol, anything else is refused. */
@Injectable()
class RoleGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest();
    if (req.headers['x-role'] !== 'ops') return false;
    req.user = { username: 'carol' };
    return true;
  }
}

const providers: Type<unknown>[] = [OrderSteps, Payments, OrderWorkflow, FlakyWorkflow, WaiterWorkflow];

const boot = (url: string, admin: DurableAdminModuleOptions) =>
  bootHttpApp(url, { imports: [DurableAdminModule.forRoot(admin)], providers: [...providers, RoleGuard] });

describe('admin REST API', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let api: string;
  let runs: RunRepository;

  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${api}${path}`, {
      method,
      headers: { 'x-api-key': OPS_KEY, 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json: any = null;
    try {
      json = JSON.parse(text);
    } catch {
      json = text;
    }
    return { status: res.status, body: json };
  };
  const fields = (body: any) => (body.errors as Array<{ field: string }>).map((e) => e.field).sort();
  const eventsOf = async (id: string, type: string) => (await runs.events(id)).filter((e) => e.type === type);
  const drive = (id: string, statuses?: string[]) => driveUntil(app, db, id, statuses);

  beforeAll(async () => {
    db = await createTestDatabase('admin_api');
    const guard = new ApiKeyAdminGuard({
      keys: { [OPS_KEY]: 'alice', [VIEW_KEY]: { operator: 'bob', readOnly: true } },
    });
    const booted = await boot(db.url, { path: '/ops/durable/', guard });
    app = booted.app;
    api = `${booted.http}/ops/durable/api`;
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('refuses to start without a guard or an explicit allowAnonymous', async () => {
    expect(() => DurableAdminModule.forRoot({ path: 'x' })).toThrow(InvalidOptionsError);
    expect(() => DurableAdminModule.forRoot({ path: 'x' })).toThrow(/needs a guard/);
    expect(() => DurableAdminModule.forRoot({ allowAnonymous: true, guard: RoleGuard })).toThrow(/not both/);
    expect(() => DurableAdminModule.forRoot({ allowAnonymous: 'yes' as unknown as true })).toThrow(
      /needs a guard/,
    );
    expect(() => new ApiKeyAdminGuard({ keys: { [String(undefined)]: 'x' } })).toThrow(InvalidOptionsError);
    expect(() => DurableAdminModule.forRoot({ allowAnonymous: true, observability: false })).not.toThrow();
  });

  it('answers 401 without a key or with an unknown one, 403 for a read-only key acting', async () => {
    const { run } = await runs.start('waiter', {});
    for (const path of ['/runs', `/runs/${run.id}`, '/stats']) {
      expect((await call('GET', path, undefined, { 'x-api-key': '' })).status).toBe(401);
      expect((await call('GET', path, undefined, { 'x-api-key': 'nope-nope-nope-nope-nope' })).status).toBe(
        401,
      );
      expect((await call('GET', path, undefined, { 'x-api-key': VIEW_KEY })).status).toBe(200);
    }
    expect((await call('POST', `/runs/${run.id}/cancel`, {}, { 'x-api-key': '' })).status).toBe(401);
    const denied = await call('POST', `/runs/${run.id}/cancel`, {}, { 'x-api-key': VIEW_KEY });
    expect(denied.status).toBe(403);
    expect(denied.body.message).toMatch(/bob may read/);
    const page = await fetch(`${api.replace(/\/api$/, '')}/runs/${run.id}`);
    expect(page.status).toBe(401);
    expect((await runs.get(run.id))!.status).toBe('pending'); // nothing happened
  });

  it("uses the app's own guard class through DI: false is a 403, request.user is who acted", async () => {
    const other = await boot(db.url, { path: 'admin', guard: RoleGuard, observability: false });
    try {
      const { run } = await runs.start('waiter', {});
      const url = `${other.http}/admin/api/runs/${run.id}/signal`;
      const post = (role: string) =>
        fetch(url, {
          method: 'POST',
          headers: { 'x-role': role, 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'go', payload: { n: 1 } }),
        });
      expect((await post('intern')).status).toBe(403);
      const ok = await post('ops');
      expect(ok.status).toBe(200);
      expect(((await ok.json()) as { by: string }).by).toBe('carol');
      expect((await eventsOf(run.id, 'signal.sent'))[0].payload).toEqual({ name: 'go', by: 'carol' });
    } finally {
      await other.app.close();
    }
  });

  it('lists runs with filters and keyset pagination; bad filters are 400s naming each field', async () => {
    const created: string[] = [];
    for (let i = 0; i < 5; i++) created.push((await runs.start('order', { ref: `L${i}`, amount: 5 })).run.id);
    const seen: string[] = [];
    let after: string | undefined;
    do {
      const page = await call('GET', `/runs?kind=order&limit=2${after ? `&after=${after}` : ''}`);
      expect(page.status).toBe(200);
      expect(page.body.items.length).toBeLessThanOrEqual(2);
      seen.push(...page.body.items.map((r: { id: string }) => r.id));
      after = page.body.next;
    } while (after);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual(expect.arrayContaining(created));
    expect(seen[0]).toBe(created[4]); // newest first

    expect((await call('GET', '/runs?status=succeeded&kind=order')).body.items).toEqual([]);
    await drive(created[0]); // the worker claims all five
    const done = await call('GET', '/runs?status=succeeded,failed&kind=order');
    expect(done.body.items.map((r: { id: string }) => r.id)).toEqual([...created].reverse());
    expect(done.body.items[0]).not.toHaveProperty('input'); // summaries only
    const future = new Date(Date.now() + 3_600_000).toISOString();
    expect((await call('GET', `/runs?createdFrom=${future}`)).body.items).toEqual([]);
    const past = await call('GET', `/runs?createdTo=${future}&createdFrom=2020-01-01T00:00:00Z&kind=order`);
    expect(past.body.items).toHaveLength(5);
    expect((await call('GET', '/runs?deadLettered=true')).body.items).toEqual([]);
    expect((await call('GET', '/runs?inDoubt=true')).body.items).toEqual([]);

    const bad = await call('GET', '/runs?status=bogus&limit=0&deadLettered=maybe&createdFrom=yesterday&x=1');
    expect(bad.status).toBe(400);
    expect(fields(bad.body)).toEqual(['createdFrom', 'deadLettered', 'limit', 'status', 'x']);
    expect((await call('GET', '/runs?after=bm90LWEtY3Vyc29y')).status).toBe(400);
  });

  it('shows one run with cursor, checkpoints, commands, events and timeline; 404 and 400 for bad ids', async () => {
    const { run } = await runs.start('order', { ref: 'D1', amount: 500 });
    await drive(run.id, ['waiting']);
    const res = await call('GET', `/runs/${run.id}`);
    expect(res.status).toBe(200);
    expect(res.body.run).toMatchObject({ id: run.id, status: 'waiting', cursor: { step: 0, name: 'plan' } });
    expect(res.body.checkpoints.map((c: { stepName: string }) => c.stepName)).toEqual(['plan']);
    expect(res.body.commands).toMatchObject([{ name: 'charge', status: 'awaiting_approval' }]);
    expect(res.body.events.map((e: { type: string }) => e.type)).toContain('command.approval_requested');
    expect(res.body.timeline.steps[0]).toMatchObject({ name: 'plan', kind: 'model', state: 'done' });
    expect((await call('GET', '/runs/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    const notUuid = await call('GET', '/runs/42');
    expect(notUuid.status).toBe(400);
    expect(fields(notUuid.body)).toEqual(['id']);
    const stats = await call('GET', '/stats');
    expect(stats.status).toBe(200);
    expect(stats.body.byStatus.waiting).toBeGreaterThanOrEqual(1);
  });

  it('approves and rejects commands, recording who; another run’s key is a 404, a second decision a 409', async () => {
    const a = (await runs.start('order', { ref: 'A1', amount: 700 })).run;
    const b = (await runs.start('order', { ref: 'B1', amount: 900 })).run;
    await drive(a.id, ['waiting']);
    await drive(b.id, ['waiting']);
    const keyA = (await call('GET', `/runs/${a.id}`)).body.commands[0].idempotencyKey;
    const keyB = (await call('GET', `/runs/${b.id}`)).body.commands[0].idempotencyKey;

    const missing = await call('POST', `/runs/${a.id}/approve`, { note: 7 });
    expect(missing.status).toBe(400);
    expect(fields(missing.body)).toEqual(['key', 'note']);
    expect((await call('POST', `/runs/${a.id}/approve`, { key: keyB })).status).toBe(404); // no leak across runs
    expect(
      (await call('POST', '/runs/00000000-0000-4000-8000-000000000000/approve', { key: keyA })).status,
    ).toBe(404);
    const plain = await fetch(`${api}/runs/${a.id}/approve`, {
      method: 'POST',
      headers: { 'x-api-key': OPS_KEY, 'content-type': 'text/plain' },
      body: JSON.stringify({ key: keyA }),
    });
    expect(plain.status).toBe(415); // a cross-site form cannot act

    const ok = await call('POST', `/runs/${a.id}/approve`, { key: keyA, note: 'within budget' });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ by: 'alice', command: { status: 'approved' } });
    expect((await eventsOf(a.id, 'command.approved'))[0].payload).toMatchObject({
      by: 'alice',
      note: 'within budget',
    });
    expect((await call('POST', `/runs/${a.id}/approve`, { key: keyA })).status).toBe(409);
    expect((await drive(a.id)).output).toMatchObject({ charged: { amount: 700 } });

    expect((await call('POST', `/runs/${b.id}/reject`, { key: keyB, note: 'too much' })).status).toBe(200);
    expect((await eventsOf(b.id, 'command.rejected'))[0].payload).toMatchObject({
      by: 'alice',
      note: 'too much',
    });
    expect((await drive(b.id)).output).toEqual({ declined: 'DURABLE_COMMAND_REJECTED' });
  });

  it('cancels a run (by alice), 409 when it is already finished, 404 for an unknown run', async () => {
    const { run } = await runs.start('waiter', {});
    const bad = await call('POST', `/runs/${run.id}/cancel`, { reason: 5, extra: true });
    expect(bad.status).toBe(400);
    expect(fields(bad.body)).toEqual(['extra', 'reason']);
    const res = await call('POST', `/runs/${run.id}/cancel`, { reason: 'customer withdrew' });
    expect(res.status).toBe(200);
    expect(res.body.run.status).toBe('cancelled');
    expect((await eventsOf(run.id, 'run.cancelled'))[0].payload).toEqual({
      reason: 'customer withdrew',
      by: 'alice',
    });
    const again = await call('POST', `/runs/${run.id}/cancel`, {});
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('DURABLE_INVALID_RUN_STATE');
    expect((await call('POST', '/runs/00000000-0000-4000-8000-000000000000/cancel', {})).status).toBe(404);
  });

  it('retries a dead-lettered run from its last checkpoint (by alice); 409 for a run that is not', async () => {
    const { run } = await runs.start('flaky', {});
    expect((await drive(run.id)).status).toBe('dead_lettered');
    expect(
      (await call('GET', '/runs?deadLettered=true')).body.items.map((r: { id: string }) => r.id),
    ).toEqual([run.id]);
    expect((await call('POST', `/runs/${run.id}/retry`, { force: true })).status).toBe(400);
    flakyBroken = false;
    const res = await call('POST', `/runs/${run.id}/retry`, {});
    expect(res.status).toBe(200);
    expect(res.body.run.status).toBe('waiting');
    expect((await eventsOf(run.id, 'run.retried'))[0].payload).toEqual({ by: 'alice' });
    expect((await drive(run.id)).status).toBe('succeeded');
    expect((await call('POST', `/runs/${run.id}/retry`, {})).status).toBe(409);
  });

  it('resolves an in-doubt command with the result the target reports (by alice)', async () => {
    const { run } = await runs.start('order', { ref: 'M1', amount: 13 });
    const worker = app.get(DurableWorker);
    for (let i = 0; i < 10; i++) {
      await db.query(`update ai_runs set available_at = now() where id = $1 and available_at < 'infinity'`, [
        run.id,
      ]);
      await worker.tick();
      await worker.idle();
      if ((await runs.get(run.id))!.parkedReason?.includes('in doubt')) break;
    }
    const listed = await call('GET', '/runs?inDoubt=true');
    expect(listed.body.items.map((r: { id: string }) => r.id)).toEqual([run.id]);
    const key = (await call('GET', `/runs/${run.id}`)).body.commands[0].idempotencyKey;
    const other = (await runs.start('waiter', {})).run;

    const bad = await call('POST', `/runs/${run.id}/resolve`, { key, outcome: 'maybe' });
    expect(fields(bad.body)).toEqual(['outcome']);
    const noWhy = await call('POST', `/runs/${run.id}/resolve`, { key, outcome: 'failed' });
    expect(fields(noWhy.body)).toEqual(['error']);
    expect((await call('POST', `/runs/${other.id}/resolve`, { key, outcome: 'retry' })).status).toBe(404);

    const res = await call('POST', `/runs/${run.id}/resolve`, {
      key,
      outcome: 'succeeded',
      result: { chargeId: 'ch_seen_at_vendor', amount: 13 },
    });
    expect(res.status).toBe(200);
    expect(res.body.command.status).toBe('succeeded');
    expect((await eventsOf(run.id, 'command.resolved'))[0].payload).toMatchObject({
      by: 'alice',
      outcome: 'succeeded',
    });
    expect((await drive(run.id)).output).toEqual({ charged: { chargeId: 'ch_seen_at_vendor', amount: 13 } });
    expect((await call('POST', `/runs/${run.id}/resolve`, { key, outcome: 'retry' })).status).toBe(409);
  });

  it('sends a signal (by alice); the waiting run receives it', async () => {
    const { run } = await runs.start('waiter', {});
    await drive(run.id, ['waiting']);
    const bad = await call('POST', `/runs/${run.id}/signal`, { payload: 1 });
    expect(fields(bad.body)).toEqual(['name']);
    const res = await call('POST', `/runs/${run.id}/signal`, { name: 'go', payload: { approved: true } });
    expect(res.status).toBe(200);
    expect((await eventsOf(run.id, 'signal.sent'))[0].payload).toEqual({ name: 'go', by: 'alice' });
    expect((await drive(run.id)).output).toEqual({ got: { approved: true } });
    expect((await call('POST', `/runs/${run.id}/signal`, { name: 'go' })).status).toBe(409);
  });

  it('lists the versions of each kind with their runs; the runs page shows them once a kind has a second', async () => {
    const page = async () =>
      (await fetch(`${api.replace(/\/api$/, '')}`, { headers: { 'x-api-key': OPS_KEY } })).text();
    // Unversioned kinds only (every run version 1): no versions card.
    expect(await page()).not.toContain('data-testid="version-row"');
    const { run } = await runs.start('waiter', {}, { version: 4 });
    const res = await call('GET', '/versions?kind=waiter');
    expect(res.status).toBe(200);
    expect(res.body).toContainEqual({
      kind: 'waiter',
      version: 4,
      pending: 1,
      waiting: 0,
      running: 0,
      held: 0,
      workers: 0,
    });
    expect(fields((await call('GET', '/versions?kind=')).body)).toEqual(['kind']);
    expect(fields((await call('POST', '/runs/retry-held', { kind: 'waiter', version: 0 })).body)).toEqual([
      'version',
    ]);
    expect((await call('POST', '/runs/retry-held', { kind: 'waiter', version: 4 })).body).toEqual({
      by: 'alice',
      retried: 0,
    });
    const html = await page();
    expect(html).toContain('data-testid="version-row"');
    expect(html).toMatch(/<td>waiter<\/td>\s*<td class="num">4<\/td>\s*<td class="num">1<\/td>/);
    await runs.cancel(run.id);
  });

  it('serves the inspector pages with every value escaped, and documents the API in OpenAPI', async () => {
    const { run } = await runs.start('order', { ref: '<script>alert(1)</script>', amount: 1 });
    const base = api.replace(/\/api$/, '');
    const page = await fetch(`${base}/runs/${run.id}`, { headers: { 'x-api-key': OPS_KEY } });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    expect(page.headers.get('content-security-policy')).toMatch(/default-src 'none'/);
    const text = await page.text();
    expect(text).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(text).not.toContain('<script>alert(1)');
    const list = await fetch(`${base}?kind=order`, { headers: { 'x-api-key': VIEW_KEY } });
    expect(await list.text()).toContain(run.id);

    const doc = SwaggerModule.createDocument(app, new DocumentBuilder().setTitle('t').build());
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/ops/durable/api/runs',
        '/ops/durable/api/runs/{id}',
        '/ops/durable/api/runs/{id}/approve',
        '/ops/durable/api/runs/{id}/resolve',
        '/ops/durable/health',
      ]),
    );
    expect(Object.keys(doc.paths)).not.toContain('/ops/durable'); // the HTML page is not an API
  });
});
