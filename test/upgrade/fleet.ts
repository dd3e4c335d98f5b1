import { ChildProcess, fork } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ApiAnswer, ApiRequest } from './upgrade-app';

/** A process of the upgrade test's fleet (test/upgrade/upgrade-app.ts, either release's build). */
export interface FleetProcess {
  name: string;
  child: ChildProcess;
  ready: Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** With ROLE=api: one request over IPC and its answer. */
  call(req: Omit<ApiRequest, 'id'> & Record<string, unknown>): Promise<ApiAnswer>;
  /** Sends `signal` and waits for the process to end. */
  stop(signal: NodeJS.Signals): Promise<void>;
}

let next = 0;

export function startProcess(name: string, js: string, env: Record<string, string>): FleetProcess {
  const child = fork(js, [], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const ready = new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    void exited.then((e) => reject(new Error(`${name} exited before ready: ${JSON.stringify(e)}`)));
  });
  ready.catch(() => undefined);
  const waiting = new Map<number, (a: ApiAnswer) => void>();
  child.on('message', (m: ApiAnswer | 'ready') => {
    if (m !== 'ready') waiting.get(m.id)?.(m);
  });
  return {
    name,
    child,
    ready,
    exited,
    call: (req) =>
      new Promise<ApiAnswer>((resolve) => {
        const id = ++next;
        waiting.set(id, resolve);
        child.send({ ...req, id });
      }),
    async stop(signal) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

/**
 * The payment vendor of the upgrade test: it applies a charge when the request arrives and does not
 * deduplicate keys (a second request with a key is a second charge), so "no effect twice" is the
 * engine's doing. A charge sent with `hold` gets no answer (its effect is made): the worker that sent it
 * is killed with it in flight. GET /charge/:key answers the lookup of a command in doubt.
 */
export interface Vendor {
  url: string;
  /** Charges per key. */
  effects(): Record<string, number>;
  /** Keys whose charge is held unanswered. */
  held(): number;
  close(): Promise<void>;
}

export async function startVendor(): Promise<Vendor> {
  const effects: Record<string, number> = {};
  const results = new Map<string, unknown>();
  const held: http.ServerResponse[] = [];
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
        const { key, amount, hold } = JSON.parse(body) as { key: string; amount: number; hold: boolean };
        effects[key] = (effects[key] ?? 0) + 1;
        const result = { chargeId: `ch_${++n}`, amount };
        results.set(key, result);
        if (hold) return void held.push(res);
        return send(200, result);
      }
      if (req.method === 'GET' && req.url?.startsWith('/charge/')) {
        const key = decodeURIComponent(req.url.slice('/charge/'.length));
        return results.has(key)
          ? send(200, { found: true, result: results.get(key) })
          : send(200, { found: false });
      }
      send(404, {});
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    effects: () => ({ ...effects }),
    held: () => held.length,
    close: () => {
      for (const res of held.splice(0)) res.socket?.destroy();
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}
