import { INestApplication } from '@nestjs/common';
import { createOrdersApp } from '../../examples/purchase-order/http/orders.app';
import { demoAdminAccess, describeAccess } from '../../examples/purchase-order/inspector/admin-access';
import { createInspectorApp } from '../../examples/purchase-order/inspector/inspector-app';
import { SimulatedServices, startSimulatedServices } from '../../examples/purchase-order/simulated/services';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';
import { InvalidOptionsError } from '../../src';
import { DURABLE_ADMIN_SESSION_COOKIE } from '../../src/admin';

const KEY = 'demo-admin-key-0123456789';

describe('purchase-order HTTP app (npm run start:demo)', () => {
  let db: TestDatabase;
  let services: SimulatedServices;
  let app: INestApplication;
  let base: string;

  const post = (body: unknown) =>
    fetch(`${base}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const order = { orderRef: 'PO-2026-0041', channel: 'portal', text: '240 lines for the Rotterdam site' };

  beforeAll(async () => {
    db = await createTestDatabase('demoapp');
    services = await startSimulatedServices({ timeScaleMs: 1 });
    app = await createOrdersApp({
      databaseUrl: db.url,
      services: services.settings,
      timeScaleMs: 1,
      admin: demoAdminAccess({ DEMO_ADMIN_KEY: KEY }),
    });
    await app.listen(0, '127.0.0.1');
    base = await app.getUrl();
  });
  afterAll(async () => {
    await app?.close();
    await services?.close();
    await db?.drop();
  });

  it('POST /orders twice with one order reference starts one run', async () => {
    const first = await post(order);
    expect(first.status).toBe(201);
    const a = (await first.json()) as { id: string; created: boolean };
    expect(a.created).toBe(true);
    const second = await post(order);
    expect(second.status).toBe(200);
    const b = (await second.json()) as { id: string; created: boolean };
    expect(b).toMatchObject({ id: a.id, created: false });
    const rows = await db.query(`select id from ai_runs where idempotency_key = $1`, [order.orderRef]);
    expect(rows).toEqual([{ id: a.id }]);
  });

  it('a bad body is a 400 naming each invalid field', async () => {
    const res = await post({ orderRef: 'order 41', channel: 'fax', text: 'x'.repeat(20), extra: 1 });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { errors: { field: string; messages: string[] }[] };
    const fields = body.errors.map((e) => e.field).sort();
    expect(fields).toEqual(['channel', 'extra', 'orderRef']);
    expect(body.errors.find((e) => e.field === 'orderRef')!.messages[0]).toMatch(/PO-2026-0041/);
    const none = await db.query(`select 1 from ai_runs where idempotency_key = 'order 41'`);
    expect(none).toEqual([]);
  });

  it('GET /orders/:id shows status, checkpoints, commands and events', async () => {
    const { id } = (await (await post({ ...order, orderRef: 'PO-2026-0042' })).json()) as { id: string };
    let view: any;
    await waitFor(
      async () => {
        view = await (await fetch(`${base}/orders/${id}`)).json();
        return view.status === 'succeeded';
      },
      30_000,
      'the run to succeed',
    );
    expect(view.output).toMatchObject({ orderRef: 'PO-2026-0042', status: 'placed' });
    const steps = view.checkpoints.map((c: { name: string }) => c.name);
    expect(steps).toEqual([
      'parse_request',
      'resolve_supplier',
      'build_quote',
      'command:credit_check',
      'command:charge_card',
      'command:book_shipment',
      'activate_account',
      '$uuid',
      'command:notify_buyer',
      'command:notify_supplier',
    ]);
    expect(view.checkpoints[0].meta.usage.prompt_tokens).toBeGreaterThan(13_000);
    // Step 7, a @DurableTransaction, wrote the app's own tables once, and recorded what it returned.
    const activations = await db.query(`select buyer_id from account_activations where order_ref = $1`, [
      'PO-2026-0042',
    ]);
    expect(activations).toHaveLength(1);
    const activated = view.checkpoints.find((c: { name: string }) => c.name === 'activate_account');
    expect(activated.output).toMatchObject({ buyerId: activations[0].buyer_id, active: true });
    expect(view.commands.map((c: { name: string; status: string }) => `${c.name}:${c.status}`)).toEqual([
      'credit_check:succeeded',
      'charge_card:succeeded',
      'book_shipment:succeeded',
      'notify_buyer:succeeded',
      'notify_supplier:succeeded',
    ]);
    expect(view.events.map((e: { type: string }) => e.type)).toEqual(
      expect.arrayContaining(['run.created', 'run.claimed', 'model.call_started', 'run.succeeded']),
    );
    expect((await fetch(`${base}/orders/not-a-uuid`)).status).toBe(400);
    expect((await fetch(`${base}/orders/00000000-0000-4000-8000-000000000000`)).status).toBe(404);
  });

  describe('the run inspector (DurableAdminModule at /durable)', () => {
    let runId: string;
    beforeAll(async () => {
      const res = await post({ ...order, orderRef: 'PO-2026-0043' });
      runId = ((await res.json()) as { id: string }).id;
    });

    it('the admin API answers 401 without the key or with a wrong one, 200 with DEMO_ADMIN_KEY', async () => {
      expect((await fetch(`${base}/durable/api/runs`)).status).toBe(401);
      const wrong = await fetch(`${base}/durable/api/runs`, { headers: { 'x-api-key': `${KEY}x` } });
      expect(wrong.status).toBe(401);
      const ok = await fetch(`${base}/durable/api/runs?kind=purchase-order`, {
        headers: { 'x-api-key': KEY },
      });
      expect(ok.status).toBe(200);
      const page = (await ok.json()) as { items: { id: string; kind: string }[] };
      expect(page.items.map((r) => r.id)).toContain(runId);
      const bearer = await fetch(`${base}/durable/api/runs/${runId}`, {
        headers: { authorization: `Bearer ${KEY}` },
      });
      expect(bearer.status).toBe(200);
      const detail = (await bearer.json()) as { run: { idempotencyKey: string }; timeline: unknown };
      expect(detail.run.idempotencyKey).toBe('PO-2026-0043');
      expect(detail.timeline).toBeDefined();
    });

    it('the inspector page: 401 without the key, the runs table with the key', async () => {
      expect((await fetch(`${base}/durable`)).status).toBe(401);
      const res = await fetch(`${base}/durable`, { headers: { 'x-api-key': KEY } });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/text\/html/);
      const html = await res.text();
      expect(html).toContain(`data-run-id="${runId}"`);
      expect(html).toContain('data-testid="count-succeeded"');
      expect(html).toContain('demo-operator'); // the name the event trail records for the demo's key
    });

    it("the library's sign-in page puts a session in an HttpOnly cookie that opens the inspector in a browser", async () => {
      const form = await fetch(`${base}/durable/login`);
      expect(form.status).toBe(200);
      expect(await form.text()).toContain('data-testid="login-form"');
      const signIn = (key: string) =>
        fetch(`${base}/durable/login`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ key }).toString(),
        });
      const bad = await signIn('not-the-key-0123456789');
      expect(bad.status).toBe(401);
      expect(bad.headers.get('set-cookie')).toBeNull();

      const login = await signIn(KEY);
      expect(login.status).toBe(303);
      expect(login.headers.get('location')).toBe('/durable');
      const cookie = login.headers.get('set-cookie')!;
      expect(cookie).toMatch(new RegExp(`^${DURABLE_ADMIN_SESSION_COOKIE}=[A-Za-z0-9_-]{43};`)); // a random token
      expect(cookie).not.toContain(KEY); // a session made from the key, not the key
      expect(cookie).toMatch(/HttpOnly/);
      expect(cookie).toMatch(/SameSite=Strict/);
      expect(cookie).toMatch(/Path=\/durable;/);

      const jar = { cookie: cookie.split(';')[0] };
      const list = await fetch(`${base}/durable`, { headers: jar });
      expect(list.status).toBe(200);
      const run = await fetch(`${base}/durable/runs/${runId}`, { headers: jar });
      expect(run.status).toBe(200);
      expect(await run.text()).toContain('data-testid="run-status"');
      // A wrong cookie is still refused by the guard.
      const forged = await fetch(`${base}/durable`, {
        headers: { cookie: `${DURABLE_ADMIN_SESSION_COOKIE}=${KEY}` },
      });
      expect(forged.status).toBe(401);
      // The demo's own routes are not touched.
      expect((await fetch(`${base}/orders/${runId}`)).status).toBe(200);
    });

    it('DEMO_ADMIN_KEY, DEMO_ADMIN_ANONYMOUS=1 or a key made for the process; never open by accident', async () => {
      const made = demoAdminAccess({});
      expect(made.source).toBe('generated');
      expect(made.key).toMatch(/^[0-9a-f]{24}$/);
      expect(made.options.guard).toBeDefined();
      expect(made.options.allowAnonymous).toBeUndefined();
      expect(describeAccess('http://127.0.0.1:3000', made)[0]).toBe(
        `run inspector: http://127.0.0.1:3000/durable/login#key=${made.key}   (sign in, then http://127.0.0.1:3000/durable)`,
      );
      const given = demoAdminAccess({ DEMO_ADMIN_KEY: KEY });
      expect(given).toMatchObject({ key: KEY, source: 'DEMO_ADMIN_KEY' });
      expect(describeAccess('http://127.0.0.1:3000', given).join('\n')).not.toContain(KEY); // not echoed
      expect(() => demoAdminAccess({ DEMO_ADMIN_KEY: 'short' })).toThrow(InvalidOptionsError);
      expect(() => demoAdminAccess({ DEMO_ADMIN_KEY: KEY, DEMO_ADMIN_ANONYMOUS: '1' })).toThrow(/not both/);

      const anonymous = demoAdminAccess({ DEMO_ADMIN_ANONYMOUS: '1' });
      expect(anonymous).toMatchObject({ key: null, source: 'anonymous', options: { allowAnonymous: true } });
      const open = await createInspectorApp({ databaseUrl: db.url, access: anonymous });
      try {
        await open.listen(0, '127.0.0.1');
        const res = await fetch(`${await open.getUrl()}/durable/api/runs/${runId}`);
        expect(res.status).toBe(200);
      } finally {
        await open.close();
      }
    });
  });
});
