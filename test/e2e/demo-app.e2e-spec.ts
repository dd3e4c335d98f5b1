import { INestApplication } from '@nestjs/common';
import { createOrdersApp } from '../../examples/purchase-order/http/orders.app';
import { SimulatedServices, startSimulatedServices } from '../../examples/purchase-order/simulated/services';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';

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
    app = await createOrdersApp({ databaseUrl: db.url, services: services.settings, timeScaleMs: 1 });
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
});
