import { INestApplication } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { InvalidOptionsError } from '../../src';
import { ApiKeyAdminGuard, DurableAdminModule } from '../../src/admin';
import {
  DATABASE_UNREACHABLE,
  DurableObservabilityModule,
  DurableObservabilityOptions,
} from '../../src/observability';
import { bootHttpApp } from '../helpers/app';
import { DurableWorker } from '../../src/engine/worker.service';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * Admin hardening: every admin response (API, pages, errors, health) is `no-store` and `nosniff`; the
 * mount path refuses route patterns; the unguarded health endpoint leaks no database error text and no
 * worker id unless `health.detailed` says it may.
 */
const KEY = 'hardening-key-0123456789';
const WORKER_ID = 'web-7.internal:4242:c0ffee';

async function boot(url: string, observability: DurableObservabilityOptions, worker = false) {
  const { app, http } = await bootHttpApp(url, {
    options: worker ? { worker: { enabled: true, pollIntervalMs: 50, workerId: WORKER_ID } } : {},
    imports: [
      DurableAdminModule.forRoot({
        path: 'durable',
        guard: new ApiKeyAdminGuard({ keys: { [KEY]: 'ops' } }),
        observability: { metrics: false, ...observability },
      }),
    ],
    logger: [],
  });
  return { app, http: `${http}/durable` };
}

function expectHardened(res: Response, what: string): void {
  expect({
    what,
    cache: res.headers.get('cache-control'),
    sniff: res.headers.get('x-content-type-options'),
  }).toEqual({
    what,
    cache: 'no-store',
    sniff: 'nosniff',
  });
}

describe('admin hardening', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let http: string;

  beforeAll(async () => {
    db = await createTestDatabase('admin_hardening');
    ({ app, http } = await boot(db.url, {}));
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('every admin API response, error and page carries Cache-Control: no-store and X-Content-Type-Options: nosniff', async () => {
    const key = { 'x-api-key': KEY };
    const json = { ...key, 'content-type': 'application/json' };
    const cases: Array<[string, string, RequestInit, number]> = [
      ['list', '/api/runs', { headers: key }, 200],
      ['stats', '/api/stats', { headers: key }, 200],
      ['no key', '/api/runs', {}, 401],
      ['bad key', '/api/runs', { headers: { 'x-api-key': 'nope-nope-nope-nope' } }, 401],
      ['bad id', '/api/runs/not-a-uuid', { headers: key }, 400],
      ['bad filter', '/api/runs?limit=0', { headers: key }, 400],
      ['unknown run', `/api/runs/${randomUUID()}`, { headers: key }, 404],
      ['action 404', `/api/runs/${randomUUID()}/cancel`, { method: 'POST', headers: json, body: '{}' }, 404],
      [
        'action not JSON',
        `/api/runs/${randomUUID()}/cancel`,
        { method: 'POST', headers: key, body: 'x' },
        415,
      ],
      ['runs page', '', { headers: key }, 200],
      ['run page 404', `/runs/${randomUUID()}`, { headers: key }, 404],
      ['page no key', '', {}, 401],
      ['health', '/health', {}, 200],
    ];
    for (const [what, path, init, status] of cases) {
      const res = await fetch(`${http}${path}`, init);
      expect({ what, status: res.status }).toEqual({ what, status });
      expectHardened(res, what);
    }
  });

  it('refuses a mount path with wildcards or route patterns, naming the field', () => {
    for (const path of ['ops/*', 'ops/:id', 'ops/(.*)', 'ops?x', 'ops/{x}', 'ops/*splat', 'a b']) {
      let err: unknown;
      try {
        DurableAdminModule.forRoot({ path, allowAnonymous: true, observability: false });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(InvalidOptionsError);
      expect((err as InvalidOptionsError).problems).toEqual([
        expect.stringMatching(/^DurableAdminModule: path must be/),
      ]);
    }
    expect(() =>
      DurableAdminModule.forRoot({ path: '/ops/durable/', allowAnonymous: true, observability: false }),
    ).not.toThrow();
    expect(() =>
      DurableObservabilityModule.forRoot({ metrics: false, health: { path: 'health/*' } }),
    ).toThrow(/health\.path must be/);
    expect(() => DurableObservabilityModule.forRoot({ metrics: { path: ':m' }, health: false })).toThrow(
      /metrics\.path must be/,
    );
  });

  it('health: an unguarded caller gets no database error text and no worker id; health.detailed shows them', async () => {
    const check = async (base: string) => {
      const res = await fetch(`${base}/health`);
      expectHardened(res, `health ${res.status}`);
      return { status: res.status, text: await res.text() };
    };
    for (const detailed of [false, true]) {
      const other = await createTestDatabase(`admin_health_${detailed ? 'detailed' : 'plain'}`);
      const b = await boot(other.url, { health: { detailed, databaseTimeoutMs: 1000 } }, true);
      try {
        await new Promise((r) => setTimeout(r, 150));
        const up = await check(b.http);
        expect(up.status).toBe(200);
        expect(up.text.includes(WORKER_ID)).toBe(detailed);
        await other.drop(); // the database is gone: the pool's connections are terminated
        const down = await check(b.http);
        expect(down.status).toBe(503);
        const body = JSON.parse(down.text);
        expect(body.error.database.status).toBe('down');
        if (detailed) {
          expect(body.error.database.message).not.toBe(DATABASE_UNREACHABLE);
          expect(down.text).toContain(WORKER_ID);
        } else {
          expect(body.error.database.message).toBe(DATABASE_UNREACHABLE);
          expect(down.text).not.toContain(WORKER_ID);
          expect(down.text).not.toContain(other.name);
          expect(down.text).not.toMatch(/127\.0\.0\.1|5432|terminat|does not exist|ECONNREFUSED/i);
        }
      } finally {
        await b.app.get(DurableWorker).beforeApplicationShutdown();
        await b.app.close();
        await other.drop();
      }
    }
  });
});
