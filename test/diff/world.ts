/**
 * The outside world of the durable runs, a loopback HTTP server in the test process (workers in other
 * processes reach it too): when each run began (its `diff_begin` step), every execution of a step or
 * command body (when it was called against when it should have been: the run's lateness), and the
 * command target: every POST /effect is one effect (no deduplication by key: a command sent twice
 * counts twice), answered by key at GET /effect for the engine's lookup.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Execution {
  label: string;
  kind: 'step' | 'cmd' | 'child';
  /** When the body should have been called (ms, the run's begin + its virtual call time). */
  due: number;
  at: number;
  pid: number;
}

interface RunRecord {
  t0?: number;
  begun: Array<(t0: number) => void>;
  executions: Execution[];
  /** Effects by label. */
  effects: Record<string, number>;
}

export interface DiffWorld {
  url: string;
  /** Resolves with the run's begin time (ms) once its begin step ran. */
  begun(runId: string): Promise<number>;
  run(runId: string): { executions: Execution[]; effects: Record<string, number> };
  close(): Promise<void>;
}

export async function startWorld(): Promise<DiffWorld> {
  const runs = new Map<string, RunRecord>();
  const results = new Map<string, unknown>();
  const of = (runId: string) => {
    let r = runs.get(runId);
    if (!r) runs.set(runId, (r = { begun: [], executions: [], effects: {} }));
    return r;
  };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const send = (v: unknown) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(v));
      };
      const url = new URL(req.url ?? '/', 'http://x');
      if (req.method === 'GET' && url.pathname === '/effect') {
        const key = url.searchParams.get('key')!;
        return send(results.has(key) ? { found: true, result: results.get(key) } : { found: false });
      }
      const a = JSON.parse(body || '{}') as Record<string, any>;
      const r = of(a.runId);
      if (url.pathname === '/begin') {
        if (r.t0 === undefined) {
          r.t0 = Date.now();
          for (const f of r.begun.splice(0)) f(r.t0);
        }
        return send({ t0: r.t0 });
      }
      if (url.pathname === '/exec') {
        r.executions.push({ label: a.label, kind: a.kind, due: a.due, at: Date.now(), pid: a.pid });
        return send({});
      }
      if (url.pathname === '/effect') {
        r.effects[a.label] = (r.effects[a.label] ?? 0) + 1;
        results.set(a.key, a.result);
        return send(a.result);
      }
      res.writeHead(404).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    begun: (runId) =>
      new Promise((resolve) => {
        const r = of(runId);
        if (r.t0 !== undefined) resolve(r.t0);
        else r.begun.push(resolve);
      }),
    run: (runId) => {
      const r = of(runId);
      return { executions: [...r.executions], effects: { ...r.effects } };
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}
