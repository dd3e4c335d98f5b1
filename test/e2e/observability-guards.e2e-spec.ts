import {
  CanActivate,
  ExecutionContext,
  Injectable,
  INestApplication,
  UnauthorizedException,
} from '@nestjs/common';
import { ApiKeyAdminGuard, DurableAdminModule } from '../../src/admin';
import { DurableObservabilityModule } from '../../src/observability';
import { bootHttpApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * `metrics.guard` and `health.guard`: open by default (scrapers and probes send no credentials), and
 * when set, the guard's answers are the routes' answers, whether it is an instance or a class the
 * app's DI builds; a guarded health route may then show the `detailed` checks.
 */
const PROBE_KEY = 'probe-key-0123456789abcd';
const ADMIN_KEY = 'admin-key-0123456789abcd';
const WORKER_ID = 'api-3.internal:77:beef';

/** A provider the scrape guard depends on (as an app's secrets service would be). */
@Injectable()
class ScrapeToken {
  readonly value = 'scrape-token-0123456789';
}

/** The app's own guard class, a provider of the app: a wrong token is "not you" (false, a 403). */
@Injectable()
class ScrapeGuard implements CanActivate {
  constructor(private readonly token: ScrapeToken) {}
  canActivate(context: ExecutionContext): boolean {
    const given = context.switchToHttp().getRequest().headers['x-scrape-token'];
    if (!given) throw new UnauthorizedException('scrape token required');
    return given === this.token.value;
  }
}

describe('metrics.guard and health.guard', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('obs_guards');
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('by default /metrics and the health route are open', async () => {
    const { app, http } = await bootHttpApp(db.url, {
      imports: [DurableObservabilityModule.forRoot({ metrics: { snapshotTtlMs: 0 } })],
      logger: [],
    });
    try {
      const metrics = await fetch(`${http}/metrics`);
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toContain('durable_queue_depth');
      expect((await fetch(`${http}/durable/health`)).status).toBe(200);
    } finally {
      await app.close();
    }
  });

  describe('guarded (DurableAdminModule.forRoot)', () => {
    let app: INestApplication;
    let http: string;
    beforeAll(async () => {
      ({ app, http } = await bootHttpApp(db.url, {
        options: { worker: { enabled: true, pollIntervalMs: 50, workerId: WORKER_ID } },
        imports: [
          DurableAdminModule.forRoot({
            path: 'durable',
            guard: new ApiKeyAdminGuard({ keys: { [ADMIN_KEY]: 'ops' } }),
            observability: {
              metrics: { guard: ScrapeGuard },
              health: { guard: new ApiKeyAdminGuard({ keys: { [PROBE_KEY]: 'probe' } }), detailed: true },
            },
          }),
        ],
        providers: [ScrapeToken, ScrapeGuard], // the app's provider of it is the one used
        logger: [],
      }));
    });
    afterAll(async () => {
      await app?.close();
    });

    it("metrics: the guard class, the app's provider with its dependency, answers 401, 403 and 200", async () => {
      const none = await fetch(`${http}/metrics`);
      expect(none.status).toBe(401);
      expect(none.headers.get('cache-control')).toBe('no-store'); // set before the guard refused
      expect(await none.text()).not.toContain('durable_');
      expect((await fetch(`${http}/metrics`, { headers: { 'x-scrape-token': 'wrong' } })).status).toBe(403);
      // The admin key is not the scrape token: each route has its own guard.
      expect((await fetch(`${http}/metrics`, { headers: { 'x-api-key': ADMIN_KEY } })).status).toBe(401);
      const ok = await fetch(`${http}/metrics`, { headers: { 'x-scrape-token': 'scrape-token-0123456789' } });
      expect(ok.status).toBe(200);
      expect(await ok.text()).toContain('durable_runs');
    });

    it('health: 401 without the key; with it, the detailed checks (the worker id) that detailed: true allows', async () => {
      const none = await fetch(`${http}/durable/health`);
      expect(none.status).toBe(401);
      expect(await none.text()).not.toContain(WORKER_ID);
      await new Promise((r) => setTimeout(r, 150)); // a claim round or two
      const ok = await fetch(`${http}/durable/health`, { headers: { authorization: `Bearer ${PROBE_KEY}` } });
      expect(ok.status).toBe(200);
      const body = (await ok.json()) as { info: { worker: { workerId?: string } } };
      expect(body.info.worker.workerId).toBe(WORKER_ID);
    });

    it('the admin API keeps its own guard', async () => {
      expect((await fetch(`${http}/durable/api/stats`, { headers: { 'x-api-key': PROBE_KEY } })).status).toBe(
        401,
      );
      expect((await fetch(`${http}/durable/api/stats`, { headers: { 'x-api-key': ADMIN_KEY } })).status).toBe(
        200,
      );
    });
  });

  it('a guard that is not a CanActivate is refused at start-up, naming the field', () => {
    const notAGuard = { allow: true } as unknown as ApiKeyAdminGuard;
    expect(() => DurableObservabilityModule.forRoot({ metrics: { guard: notAGuard } })).toThrow(
      /metrics\.guard must be a CanActivate class or instance/,
    );
    expect(() =>
      DurableAdminModule.forRoot({ allowAnonymous: true, observability: { health: { guard: notAGuard } } }),
    ).toThrow(/DurableAdminModule: observability\.health\.guard must be/);
  });
});
