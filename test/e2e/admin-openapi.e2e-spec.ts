import { CanActivate, Controller, Get, INestApplication, Injectable } from '@nestjs/common';
import { DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import {
  addDurableAdminSecurity,
  ApiKeyAdminGuard,
  DURABLE_ADMIN_SESSION_COOKIE,
  DurableAdminModule,
  DurableAdminModuleOptions,
} from '../../src/admin';
import { bootModules, durableModule } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * The admin API's security in the app's OpenAPI document (`@nestjs/swagger` is installed here):
 * `addDurableAdminSecurity` declares the schemes the admin guard reads and requires them on every
 * admin API operation, and on nothing else.
 */
const KEY = 'openapi-key-0123456789ab';

@Controller('orders')
class OrdersController {
  @Get()
  list() {
    return [];
  }
}

@Injectable()
class SessionGuard implements CanActivate {
  canActivate() {
    return true;
  }
}

type Operation = { tags?: string[]; security?: Array<Record<string, string[]>> };

/** Every operation of the document: `GET /ops/durable/api/runs` → its object. */
function operations(doc: OpenAPIObject): Record<string, Operation> {
  const out: Record<string, Operation> = {};
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item as Record<string, Operation>)) {
      out[`${method.toUpperCase()} ${path}`] = op;
    }
  }
  return out;
}

describe('OpenAPI: the admin API declares its security', () => {
  let db: TestDatabase;
  const apps: INestApplication[] = [];
  const boot = async (
    admin: DurableAdminModuleOptions | ReturnType<typeof DurableAdminModule.forRootAsync>,
  ) => {
    const app = await bootModules({
      imports: [durableModule(db.url), 'module' in admin ? admin : DurableAdminModule.forRoot(admin)],
      providers: [SessionGuard],
      controllers: [OrdersController],
    });
    apps.push(app);
    return app;
  };
  const document = (app: INestApplication, config = new DocumentBuilder().setTitle('shop').build()) =>
    SwaggerModule.createDocument(app, config);

  beforeAll(async () => {
    db = await createTestDatabase('admin_openapi');
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
    await db?.drop();
  });

  it('ApiKeyAdminGuard: its header as an apiKey scheme, Bearer, and the sign-in cookie, on each admin API operation only', async () => {
    const app = await boot({
      path: 'ops/durable',
      guard: new ApiKeyAdminGuard({ keys: { [KEY]: 'ops' }, header: 'X-Ops-Key' }),
      login: true,
    });
    const plain = document(app);
    // Swagger alone declares nothing (it takes schemes from the DocumentBuilder config only).
    expect(plain.components?.securitySchemes).toBeUndefined();

    const doc = addDurableAdminSecurity(app, document(app));
    expect(doc.components!.securitySchemes).toEqual({
      'durable-admin-key': expect.objectContaining({ type: 'apiKey', in: 'header', name: 'x-ops-key' }),
      'durable-admin-bearer': expect.objectContaining({ type: 'http', scheme: 'bearer' }),
      'durable-admin-session': expect.objectContaining({
        type: 'apiKey',
        in: 'cookie',
        name: DURABLE_ADMIN_SESSION_COOKIE,
      }),
    });
    const ops = operations(doc);
    const admin = Object.keys(ops).filter((k) => k.includes(' /ops/durable/api/'));
    expect(admin).toEqual(
      expect.arrayContaining([
        'GET /ops/durable/api/runs',
        'GET /ops/durable/api/stats',
        'GET /ops/durable/api/runs/{id}',
        'POST /ops/durable/api/runs/{id}/cancel',
        'POST /ops/durable/api/runs/{id}/resolve',
        'POST /ops/durable/api/runs/{id}/signal',
      ]),
    );
    for (const k of admin) {
      expect({ k, security: ops[k].security }).toEqual({
        k,
        security: [
          { 'durable-admin-key': [] },
          { 'durable-admin-bearer': [] },
          { 'durable-admin-session': [] },
        ],
      });
    }
    // The open health route and the app's own operations are left alone.
    expect(ops['GET /ops/durable/health'].security).toBeUndefined();
    expect(ops['GET /orders'].security).toBeUndefined();
    expect(Object.keys(ops)).not.toContain('GET /ops/durable/login'); // the sign-in page is not an API
  });

  it("another guard: a generic bearer scheme, or the app's own declaration through openApi.securitySchemes", async () => {
    const app = await boot({ path: 'a', guard: SessionGuard, observability: false });
    const doc = addDurableAdminSecurity(app, document(app));
    expect(doc.components!.securitySchemes).toEqual({
      'durable-admin': expect.objectContaining({ type: 'http', scheme: 'bearer' }),
    });
    expect(operations(doc)['GET /a/api/runs'].security).toEqual([{ 'durable-admin': [] }]);

    // The app's guard reads the JWT its DocumentBuilder already declares as `bearer`: that declaration stays.
    const jwt = await boot({
      path: 'b',
      guard: SessionGuard,
      observability: false,
      openApi: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
    });
    const config = new DocumentBuilder()
      .setTitle('shop')
      .addBearerAuth({ type: 'http', bearerFormat: 'JWT' })
      .build();
    const declared = addDurableAdminSecurity(jwt, document(jwt, config));
    expect(declared.components!.securitySchemes).toEqual({
      bearer: { type: 'http', bearerFormat: 'JWT', scheme: 'bearer' },
    });
    expect(operations(declared)['POST /b/api/runs/{id}/cancel'].security).toEqual([{ bearer: [] }]);
    expect(() =>
      DurableAdminModule.forRoot({ guard: SessionGuard, openApi: { securitySchemes: {} } }),
    ).toThrow(/openApi\.securitySchemes must map names/);
  });

  it('forRootAsync: the guard the factory returned; allowAnonymous declares nothing', async () => {
    const app = await boot(
      DurableAdminModule.forRootAsync({
        path: 'c',
        observability: false,
        useFactory: async () => ({
          guard: new ApiKeyAdminGuard({ keys: { [KEY]: 'ops' }, header: 'x-c-key' }),
        }),
      }),
    );
    const doc = addDurableAdminSecurity(app, document(app));
    expect(doc.components!.securitySchemes!['durable-admin-key']).toMatchObject({ name: 'x-c-key' });
    expect(Object.keys(doc.components!.securitySchemes!)).not.toContain('durable-admin-session');

    const open = await boot({ path: 'd', allowAnonymous: true, observability: false });
    const none = addDurableAdminSecurity(open, document(open));
    expect(none.components?.securitySchemes).toBeUndefined();
    expect(operations(none)['GET /d/api/runs'].security).toBeUndefined();
  });
});
