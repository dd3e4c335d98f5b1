import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A loopback payment provider for tests (and the ground truth of effects): POST /charge applies a
 * charge for an idempotency key, GET /charge/:key answers a lookup by key, GET /effects counts effects
 * per key. When `honoursKeys` is true a repeated key returns the first result without a new effect.
 */
export interface FakeTarget {
  url: string;
  effects(): Record<string, number>;
  /** Requests received per key (including deduplicated ones). */
  requests(): Record<string, number>;
  /** With `holdFirst`: how many first charges are held unanswered (no effect made). */
  held(): number;
  /** With `holdFirst`: resets the connections of the held charges (a keep-alive socket reset). */
  resetHeld(): void;
  close(): Promise<void>;
}

export async function startFakeTarget(
  opts: { honoursKeys?: boolean; holdFirst?: boolean } = {},
): Promise<FakeTarget> {
  const honours = opts.honoursKeys ?? true;
  const firstSeen = new Set<string>();
  const held: http.ServerResponse[] = [];
  const results = new Map<string, unknown>();
  const effects: Record<string, number> = {};
  const requests: Record<string, number> = {};
  let n = 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const send = (code: number, v: unknown) => {
        res.writeHead(code, { 'content-type': 'application/json' });
        res.end(JSON.stringify(v));
      };
      if (req.method === 'POST' && req.url === '/charge') {
        const { key, amount } = JSON.parse(body) as { key: string; amount: number };
        requests[key] = (requests[key] ?? 0) + 1;
        if (opts.holdFirst && !firstSeen.has(key)) {
          // The first charge of a key gets no answer and no effect; the test resets its socket.
          firstSeen.add(key);
          held.push(res);
          return;
        }
        if (honours && results.has(key)) return send(200, results.get(key));
        effects[key] = (effects[key] ?? 0) + 1;
        const result = { chargeId: `ch_${++n}`, amount };
        results.set(key, result);
        return send(200, result);
      }
      if (req.method === 'GET' && req.url?.startsWith('/charge/')) {
        const key = decodeURIComponent(req.url.slice('/charge/'.length));
        return results.has(key)
          ? send(200, { found: true, result: results.get(key) })
          : send(404, { found: false });
      }
      if (req.method === 'GET' && req.url === '/effects') return send(200, effects);
      send(404, {});
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    effects: () => ({ ...effects }),
    requests: () => ({ ...requests }),
    held: () => held.length,
    resetHeld: () => {
      for (const res of held.splice(0)) res.socket?.resetAndDestroy();
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** Client side used by the test providers: charge with a key, look a key up. */
export async function charge(
  url: string,
  key: string,
  amount: number,
): Promise<{ chargeId: string; amount: number }> {
  const res = await fetch(`${url}/charge`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ key, amount }),
  });
  if (!res.ok) throw new Error(`charge failed with HTTP ${res.status}`);
  return (await res.json()) as { chargeId: string; amount: number };
}

export async function lookupCharge(
  url: string,
  key: string,
): Promise<{ found: true; result: unknown } | { found: false }> {
  const res = await fetch(`${url}/charge/${encodeURIComponent(key)}`);
  return (await res.json()) as { found: true; result: unknown } | { found: false };
}
