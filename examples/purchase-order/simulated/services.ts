/**
 * The simulated outside world on one loopback HTTP server: the model provider (`/v1/chat/completions`)
 * and the vendors a purchase order touches. Latencies are the chapter's, scaled by `timeScaleMs`.
 *
 * Vendors that apply an effect (credit bureau, payments, carrier, notifications) behave like careful
 * real ones: an `Idempotency-Key` header is required, a repeated key returns the first result without
 * a second effect (also while the first request is still being processed), and `GET /<vendor>/<key>`
 * answers a lookup by key (waiting for a request with that key that is still in flight). The effect is
 * applied half-way through the latency, so a worker killed mid-call leaves an effect it never heard
 * about: exactly the ambiguity a crash creates in production.
 */
import http, { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CHAPTER_SECONDS, CREDIT_ENQUIRY_EUR, ServiceSettings, scaled } from '../config';
import { EffectKind, Ledger } from './ledger';
import { handleModel, hash } from './model-endpoint';

export interface SimulatedServices {
  settings: ServiceSettings;
  ledger: Ledger;
  close(): Promise<void>;
}

interface Keyed {
  done: Map<string, unknown>;
  inflight: Map<string, Promise<unknown>>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startSimulatedServices(opts: {
  timeScaleMs: number;
  /** ± fraction of random spread on every latency. Default 0.15. */
  jitter?: number;
}): Promise<SimulatedServices> {
  const ledger = new Ledger();
  const jitter = opts.jitter ?? 0.15;
  const latency = (chapterSeconds: number) =>
    Math.round(scaled(chapterSeconds, opts.timeScaleMs) * (1 - jitter + Math.random() * 2 * jitter));
  const vendors: Record<string, Keyed> = {};
  const keyed = (name: string) => (vendors[name] ??= { done: new Map(), inflight: new Map() });
  let seq = 0;

  const send = (res: ServerResponse, code: number, value: unknown) => {
    if (res.destroyed) return;
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify(value));
  };

  /** One effect-bearing call: deduplicated by key, effect applied half-way through the latency. */
  async function effectCall(
    vendor: string,
    kind: EffectKind,
    key: string,
    ref: string,
    ms: number,
    make: () => unknown,
  ): Promise<unknown> {
    const v = keyed(vendor);
    ledger.order(ref).requests[kind]++;
    if (v.done.has(key)) return v.done.get(key);
    const running = v.inflight.get(key);
    if (running) return running;
    const p = (async () => {
      await sleep(ms / 2);
      const result = make();
      ledger.effect(ref, kind);
      v.done.set(key, result);
      v.inflight.delete(key);
      await sleep(ms / 2);
      return result;
    })();
    v.inflight.set(key, p);
    return p;
  }

  async function lookup(vendor: string, key: string, res: ServerResponse) {
    const v = keyed(vendor);
    ledger.lookups++;
    const running = v.inflight.get(key);
    if (running) await running;
    if (v.done.has(key)) return send(res, 200, { found: true, result: v.done.get(key) });
    send(res, 404, { found: false });
  }

  async function route(req: IncomingMessage, body: string, res: ServerResponse): Promise<void> {
    if (handleModel(req, body, res, ledger, () => latency(CHAPTER_SECONDS.parseRequest))) return;
    const url = new URL(req.url ?? '/', 'http://loopback');
    const parts = url.pathname.split('/').filter(Boolean);
    const json = (body ? JSON.parse(body) : {}) as Record<string, any>;
    const ref = String(json.orderRef ?? url.searchParams.get('orderRef') ?? 'unknown');
    const key = String(req.headers['idempotency-key'] ?? '');

    if (req.method === 'GET' && url.pathname === '/suppliers') {
      ledger.order(ref).supplierLookups++;
      await sleep(latency(CHAPTER_SECONDS.resolveSupplier));
      const h = hash(url.searchParams.get('hint') ?? '');
      return send(res, 200, { supplierId: `sup_${(h % 900) + 100}`, terms: h % 2 ? 'net30' : 'net60' });
    }
    if (req.method === 'POST' && url.pathname === '/catalog/prices') {
      const skus = json.skus as string[];
      const o = ledger.order(ref);
      const entry = o.priceRequests.get(json.from) ?? { requests: 0, items: skus.length };
      entry.requests++;
      o.priceRequests.set(json.from, entry);
      await sleep(latency(CHAPTER_SECONDS.priceLookup * skus.length));
      return send(res, 200, { prices: skus.map((s) => 500 + (hash(s) % 20000)) });
    }
    const effectRoutes: Record<string, { kind: (j: Record<string, any>) => EffectKind; seconds: number }> = {
      'credit-checks': { kind: () => 'credit_check', seconds: CHAPTER_SECONDS.creditCheck },
      charges: { kind: () => 'charge_card', seconds: CHAPTER_SECONDS.chargeCard },
      shipments: { kind: () => 'book_shipment', seconds: CHAPTER_SECONDS.bookShipment },
      notifications: {
        kind: (j) => (j.to === 'supplier' ? 'notify_supplier' : 'notify_buyer'),
        seconds: CHAPTER_SECONDS.notifyBuyer,
      },
    };
    const r = effectRoutes[parts[0]];
    if (r && req.method === 'GET' && parts.length === 2) {
      return lookup(parts[0], decodeURIComponent(parts[1]), res);
    }
    if (r && req.method === 'POST' && parts.length === 1) {
      if (!key) return send(res, 400, { error: 'Idempotency-Key header is required' });
      const kind = r.kind(json);
      const n = ++seq;
      const result = await effectCall(parts[0], kind, key, ref, latency(r.seconds), () => {
        switch (kind) {
          case 'credit_check': {
            const score = 600 + (hash(String(json.buyerId)) % 200);
            return { enquiryId: `ce_${n}`, score, approved: score >= 610, feeEur: CREDIT_ENQUIRY_EUR };
          }
          case 'charge_card':
            return { chargeId: `ch_${n}`, amountCents: json.amountCents, currency: 'EUR' };
          case 'book_shipment':
            return { shipmentId: `shp_${n}`, carrier: 'DHL Freight', etaDays: 3 + (n % 4) };
          default:
            if (kind === 'notify_supplier' && json.supplierOrderNo) {
              ledger.order(ref).supplierOrderNumbers.add(String(json.supplierOrderNo));
            }
            return { messageId: `msg_${n}` };
        }
      });
      return send(res, 200, result);
    }
    send(res, 404, { error: `no route ${req.method} ${url.pathname}` });
  }

  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      route(req, body, res).catch((err: Error) => send(res, 500, { error: err.message }));
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  const base = `http://127.0.0.1:${port}`;
  return {
    settings: { vendorsUrl: base, modelUrl: base, model: 'gpt-4.1-mini' },
    ledger,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
