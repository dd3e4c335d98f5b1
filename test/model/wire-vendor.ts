/**
 * The model's vendors over a real socket: a command body's charge leaves the process as an HTTP
 * request (fetch or node:http, by key) to a loopback server in the same process, which applies it to
 * the case's FakeVendor. So the fenced transport stands between a body and its effect, as in an app:
 * a zombie woken inside a command body (the `in-body` point, before its request) must not reach the
 * vendor once its lease is gone. The server is started once per process; a request names the vendor
 * that sent it (a late request of an ended case lands in that case's world, not the current one).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { FakeVendor } from './world';

type Sent = Parameters<FakeVendor['receive']>;

let listening: Promise<string> | null = null;

function serverUrl(): Promise<string> {
  listening ??= new Promise((resolve) => {
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        const { vendor, ctx, args } = JSON.parse(body) as {
          vendor: number;
          ctx: Sent[0];
          args: Sent[1];
        };
        const answer = (code: number, v: unknown) =>
          res.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify(v));
        const target = FakeVendor.byId(vendor);
        if (!target) return answer(500, { message: `vendor ${vendor} is gone`, retryable: false });
        target.receive(ctx, args).then(
          (result) => answer(200, { result }),
          (err: Error & { retryable?: boolean }) =>
            answer(500, { message: err.message, retryable: err.retryable }),
        );
      });
    });
    server.keepAliveTimeout = 60_000;
    server.listen(0, '127.0.0.1', () => {
      server.unref();
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}/apply`);
    });
  });
  return listening;
}

function post(
  url: string,
  body: string,
  client: 'fetch' | 'http',
): Promise<{ status: number; text: string }> {
  const headers = { 'content-type': 'application/json' };
  if (client === 'fetch')
    return fetch(url, { method: 'POST', headers, body }).then(async (r) => ({
      status: r.status,
      text: await r.text(),
    }));
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Sends one charge to a vendor over the wire; the vendor's refusal comes back as the same error. */
export async function sendOverWire(vendor: FakeVendor, ...[ctx, args]: Sent): Promise<unknown> {
  const body = JSON.stringify({
    vendor: vendor.id,
    ctx: {
      idempotencyKey: ctx.idempotencyKey,
      fence: { runId: ctx.fence.runId, epoch: ctx.fence.epoch, timeline: ctx.fence.timeline },
    },
    args,
  });
  // Both clients of the fenced transport: undici (fetch) and node:http, by the key's last character.
  const client = ctx.idempotencyKey.charCodeAt(ctx.idempotencyKey.length - 1) % 2 ? 'fetch' : 'http';
  const { status, text } = await post(await serverUrl(), body, client);
  const answer = JSON.parse(text) as { result?: unknown; message?: string; retryable?: boolean };
  if (status === 200) return answer.result;
  throw Object.assign(new Error(answer.message), answer.retryable === false ? { retryable: false } : {});
}
