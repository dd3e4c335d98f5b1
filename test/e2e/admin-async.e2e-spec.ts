import { DynamicModule, INestApplication } from '@nestjs/common';
import { DurableWorkflow, InvalidOptionsError, RunContext, RunRepository } from '../../src';
import {
  ApiKeyAdminGuard,
  DURABLE_ADMIN_SESSION_COOKIE,
  DurableAdminModule,
  DurableAdminModuleAsyncOptions,
  DurableAdminModuleOptions,
  MountMismatchError,
} from '../../src/admin';
import { DurableObservabilityAsyncOptions, DurableObservabilityModule } from '../../src/observability';
import { bootError, bootHttpApp, durableModule } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * `forRootAsync` of the admin and observability modules with their keys and guards from a config
 * service; the routes come from forRootAsync's own options, and a factory that returns another mount
 * fails the bootstrap with MountMismatchError.
 */
const OPS_KEY = 'async-ops-key-0123456789';
const SCRAPE_KEY = 'async-scrape-key-0123456789';

/**
 * Stands in for @nestjs/config's ConfigService (not installed in this repository): a provider of an
 * imported module that the factory injects, as `inject: [ConfigService]` would.
 */
class AppConfig {
  static reads = 0;
  constructor(private readonly values: Record<string, string>) {}
  getOrThrow(name: string): string {
    AppConfig.reads++;
    const v = this.values[name];
    if (v === undefined) throw new Error(`${name} is not set`);
    return v;
  }
}

/** Stands in for `ConfigModule.forRoot()`. */
const configModule = (): DynamicModule => ({
  module: class AppConfigModule {},
  providers: [
    {
      provide: AppConfig,
      useValue: new AppConfig({ OPS_KEY, OPS_NAME: 'oncall-from-config', SCRAPE_KEY }),
    },
  ],
  exports: [AppConfig],
});

@DurableWorkflow('async-waiter')
class WaiterWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    return { got: await ctx.waitForSignal('go') };
  }
}

const keyGuard = (key: string, operator: string) => new ApiKeyAdminGuard({ keys: { [key]: operator } });

describe('forRootAsync of the admin and observability modules', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('admin_async');
  });
  afterAll(async () => {
    await db?.drop();
  });

  describe('DurableAdminModule.forRootAsync with keys and guards from the config service', () => {
    let app: INestApplication;
    let http: string;
    let factoryCalls = 0;

    beforeAll(async () => {
      AppConfig.reads = 0;
      ({ app, http } = await bootHttpApp(db.url, {
        imports: [
          DurableAdminModule.forRootAsync({
            path: '/ops/durable/',
            login: true,
            observability: { metrics: { path: 'ops/metrics' } },
            imports: [configModule()],
            inject: [AppConfig],
            useFactory: async (config: AppConfig): Promise<DurableAdminModuleOptions> => {
              factoryCalls++;
              return {
                path: 'ops/durable', // repeating the mount is fine
                guard: keyGuard(config.getOrThrow('OPS_KEY'), config.getOrThrow('OPS_NAME')),
                login: { sessionTtlMs: 60_000 },
                observability: {
                  metrics: {
                    guard: keyGuard(config.getOrThrow('SCRAPE_KEY'), 'prometheus'),
                    snapshotTtlMs: 0,
                  },
                },
              };
            },
          }),
        ],
        providers: [WaiterWorkflow],
        logger: [],
      }));
    });
    afterAll(async () => {
      await app?.close();
    });

    it('runs the factory once and guards the API with the keys it read', async () => {
      expect(factoryCalls).toBe(1);
      expect(AppConfig.reads).toBe(3);
      const api = `${http}/ops/durable/api`;
      expect((await fetch(`${api}/runs`)).status).toBe(401);
      expect((await fetch(`${api}/runs`, { headers: { 'x-api-key': SCRAPE_KEY } })).status).toBe(401);
      expect((await fetch(`${api}/runs`, { headers: { 'x-api-key': OPS_KEY } })).status).toBe(200);
      const { run } = await app.get(RunRepository).start('async-waiter', {});
      const res = await fetch(`${api}/runs/${run.id}/signal`, {
        method: 'POST',
        headers: { 'x-api-key': OPS_KEY, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'go' }),
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { by: string }).by).toBe('oncall-from-config');
    });

    it('mounts the sign-in page given statically, with the session length the factory gave', async () => {
      const res = await fetch(`${http}/ops/durable/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ key: OPS_KEY }).toString(),
      });
      expect(res.status).toBe(303);
      const cookie = res.headers.get('set-cookie')!;
      expect(cookie).toMatch(new RegExp(`^${DURABLE_ADMIN_SESSION_COOKIE}=`));
      expect(cookie.split('; ')).toEqual(expect.arrayContaining(['Path=/ops/durable', 'Max-Age=60']));
    });

    it('serves metrics at the static path behind the guard from the factory, health at <path>/health', async () => {
      expect((await fetch(`${http}/metrics`)).status).toBe(404);
      expect((await fetch(`${http}/ops/metrics`)).status).toBe(401);
      expect((await fetch(`${http}/ops/metrics`, { headers: { 'x-api-key': OPS_KEY } })).status).toBe(401);
      const scraped = await fetch(`${http}/ops/metrics`, {
        headers: { authorization: `Bearer ${SCRAPE_KEY}` },
      });
      expect(scraped.status).toBe(200);
      expect(await scraped.text()).toContain('durable_runs');
      expect((await fetch(`${http}/ops/durable/health`)).status).toBe(200);
    });
  });

  it('DurableObservabilityModule.forRootAsync: routes from its own options, guards from the factory', async () => {
    const { app, http } = await bootHttpApp(db.url, {
      imports: [
        DurableObservabilityModule.forRootAsync({
          metrics: { path: 'internal/metrics' },
          health: { path: 'internal/health' },
          imports: [configModule()],
          inject: [AppConfig],
          useFactory: (config: AppConfig) => ({
            metrics: { guard: keyGuard(config.getOrThrow('SCRAPE_KEY'), 'prometheus') },
            health: { path: '/internal/health/', guard: keyGuard(config.getOrThrow('OPS_KEY'), 'probe') },
            tracing: false,
          }),
        }),
      ],
      logger: [],
    });
    try {
      expect((await fetch(`${http}/internal/metrics`)).status).toBe(401);
      const headers = { 'x-api-key': SCRAPE_KEY };
      expect((await fetch(`${http}/internal/metrics`, { headers })).status).toBe(200);
      expect((await fetch(`${http}/internal/health`)).status).toBe(401);
      expect((await fetch(`${http}/internal/health`, { headers: { 'x-api-key': OPS_KEY } })).status).toBe(
        200,
      );
      expect((await fetch(`${http}/durable/health`)).status).toBe(404);
    } finally {
      await app.close();
    }
  });

  describe('a factory cannot move a route: MountMismatchError when the bootstrap resolves it', () => {
    const guard = keyGuard(OPS_KEY, 'ops');
    const admin = (
      statics: Omit<DurableAdminModuleAsyncOptions, 'useFactory'>,
      result: DurableAdminModuleOptions,
    ) =>
      bootError({
        imports: [
          durableModule(db.url),
          DurableAdminModule.forRootAsync({ ...statics, useFactory: async () => result }),
        ],
      });
    const observability = (
      statics: Omit<DurableObservabilityAsyncOptions, 'useFactory'>,
      result: Awaited<ReturnType<DurableObservabilityAsyncOptions['useFactory']>>,
    ) =>
      bootError({
        imports: [
          durableModule(db.url),
          DurableObservabilityModule.forRootAsync({ ...statics, useFactory: () => result }),
        ],
      });

    it('the admin path', async () => {
      const err = await admin({ path: 'ops' }, { path: 'other', guard });
      expect(err).toBeInstanceOf(MountMismatchError);
      expect(err).toMatchObject({
        code: 'DURABLE_MOUNT_MISMATCH',
        moduleName: 'DurableAdminModule',
        option: 'path',
        mounted: 'ops',
        returned: 'other',
      });
      expect((err as Error).message).toMatch(/Give path in forRootAsync's own options/);
      // No path given statically: the default `durable` is mounted, and a factory's path differs.
      expect(await admin({}, { path: 'ops', guard })).toMatchObject({ option: 'path', mounted: 'durable' });
    });

    it('login, and the observability routes', async () => {
      expect(await admin({}, { guard, login: true })).toMatchObject({ option: 'login', mounted: false });
      expect(await admin({}, { guard, observability: { metrics: { path: 'm' } } })).toMatchObject({
        option: 'observability.metrics.path',
        mounted: 'metrics',
        returned: 'm',
      });
      expect(await admin({}, { guard, observability: { health: false } })).toMatchObject({
        option: 'observability.health',
      });
      expect(await admin({}, { guard, observability: false })).toMatchObject({ option: 'observability' });
      expect(await admin({ observability: false }, { guard, observability: {} })).toMatchObject({
        option: 'observability',
      });
      expect(await observability({ metrics: { path: 'm' } }, { metrics: { path: 'metrics' } })).toMatchObject(
        {
          moduleName: 'DurableObservabilityModule',
          option: 'metrics.path',
          mounted: 'm',
          returned: 'metrics',
        },
      );
      expect(await observability({ health: false }, { health: { maxBacklogAgeMs: 1 } })).toMatchObject({
        option: 'health',
      });
    });

    it('invalid options from the factory are InvalidOptionsError, as in forRoot; bad static paths fail at once', async () => {
      const err = await admin({}, {});
      expect(err).toBeInstanceOf(InvalidOptionsError);
      expect((err as InvalidOptionsError).problems).toEqual([expect.stringMatching(/needs a guard/)]);
      expect(await admin({ login: true }, { allowAnonymous: true })).toBeInstanceOf(InvalidOptionsError);
      expect(
        await observability({}, { metrics: { guard: 'nope' as unknown as ApiKeyAdminGuard } }),
      ).toMatchObject({
        problems: ['DurableObservabilityModule: metrics.guard must be a CanActivate class or instance'],
      });
      expect(() => DurableAdminModule.forRootAsync({ path: 'ops/*', useFactory: () => ({ guard }) })).toThrow(
        InvalidOptionsError,
      );
      expect(() =>
        DurableObservabilityModule.forRootAsync({ metrics: { path: ':m' }, useFactory: () => ({}) }),
      ).toThrow(/metrics\.path must be/);
    });
  });
});
