import type { INestApplicationContext } from '@nestjs/common';
import { DURABLE_ADMIN_OPTIONS } from './admin.constants';
import type { DurableSecurityScheme, ResolvedAdminOptions } from './admin-options.interface';
import { ApiKeyAdminGuard, apiKeyHeaderOf } from './api-key-admin.guard';
import { DURABLE_ADMIN_CSRF_HEADER, DURABLE_ADMIN_SESSION_COOKIE } from './login/admin-session';

/** The part of an OpenAPI 3 document (`SwaggerModule.createDocument`'s result) this changes. */
export interface OpenApiDocumentLike {
  paths?: Record<string, Record<string, any>>;
  components?: { securitySchemes?: Record<string, any>; [part: string]: any };
}

/** The tag of the admin API's operations. */
const TAG = 'durable-admin';

/** The guard instance when it can be had without starting anything. */
function guardOf(app: INestApplicationContext, o: ResolvedAdminOptions): unknown {
  const g = o.guard;
  if (typeof g !== 'function') return g;
  try {
    return app.get(g, { strict: false });
  } catch {
    return g; // created on first request: the class is known, its options are not
  }
}

/** The schemes the admin module's guard reads, or the app's `openApi.securitySchemes`. */
function schemesOf(
  app: INestApplicationContext,
  o: ResolvedAdminOptions,
): Record<string, DurableSecurityScheme> {
  if (o.openApi?.securitySchemes) return o.openApi.securitySchemes;
  if (!o.guard) return {}; // allowAnonymous
  const guard = guardOf(app, o);
  const isKeyGuard =
    guard instanceof ApiKeyAdminGuard ||
    (typeof guard === 'function' &&
      (guard === ApiKeyAdminGuard || guard.prototype instanceof ApiKeyAdminGuard));
  if (!isKeyGuard) {
    return {
      'durable-admin': {
        type: 'http',
        scheme: 'bearer',
        description:
          "The app's own admin guard decides. Declare what it really reads with DurableAdminModule's openApi.securitySchemes.",
      },
    };
  }
  const header = guard instanceof ApiKeyAdminGuard ? apiKeyHeaderOf(guard) : 'x-api-key';
  const schemes: Record<string, DurableSecurityScheme> = {
    'durable-admin-key': {
      type: 'apiKey',
      in: 'header',
      name: header,
      description: 'An API key of the admin module (ApiKeyAdminGuard).',
    },
    'durable-admin-bearer': {
      type: 'http',
      scheme: 'bearer',
      description: 'The same API key, as Authorization: Bearer <key>.',
    },
  };
  if (o.login) {
    schemes['durable-admin-session'] = {
      type: 'apiKey',
      in: 'cookie',
      name: DURABLE_ADMIN_SESSION_COOKIE,
      description: `Set by POST /${o.path}/login (the sign-in page); actions sent with it need the ${DURABLE_ADMIN_CSRF_HEADER} header.`,
    };
  }
  return schemes;
}

/**
 * Declares the admin API's security in the app's OpenAPI document: the schemes its guard reads under
 * `components.securitySchemes` (with ApiKeyAdminGuard: its header as an `apiKey` scheme,
 * `Authorization: Bearer`, and the sign-in cookie when `login` is on; with another guard, a generic bearer scheme or
 * the module's `openApi.securitySchemes`), and a `security` requirement (any one of them) on each admin
 * API operation. A scheme the document already declares under the same name is kept as it is.
 * `@nestjs/swagger` builds the document; this only edits it (swagger reads scheme definitions from the
 * DocumentBuilder config alone, not from the decorators of the library's controllers).
 * @example
 * ```ts
 * const document = addDurableAdminSecurity(app, SwaggerModule.createDocument(app, config));
 * SwaggerModule.setup('docs', app, document);
 * ```
 */
export function addDurableAdminSecurity<T extends OpenApiDocumentLike>(
  app: INestApplicationContext,
  document: T,
): T {
  let modules: ResolvedAdminOptions[];
  try {
    modules = app.get<ResolvedAdminOptions>(DURABLE_ADMIN_OPTIONS, { strict: false, each: true });
  } catch {
    return document; // no DurableAdminModule in this app
  }
  for (const o of modules) {
    const schemes = schemesOf(app, o);
    const names = Object.keys(schemes);
    if (!names.length) continue;
    document.components ??= {};
    document.components.securitySchemes = { ...schemes, ...document.components.securitySchemes };
    const api = `/${o.path ? `${o.path}/` : ''}api/`;
    for (const [path, item] of Object.entries(document.paths ?? {})) {
      if (!`${path}/`.includes(api)) continue;
      for (const op of Object.values(item ?? {})) {
        if (op && typeof op === 'object' && Array.isArray(op.tags) && op.tags.includes(TAG)) {
          op.security = names.map((name) => ({ [name]: [] }));
        }
      }
    }
  }
  return document;
}
