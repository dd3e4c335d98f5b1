/**
 * The inspector in a plain browser. `ApiKeyAdminGuard` reads the key from the `x-api-key` header (or
 * `Authorization: Bearer`), which a browser does not send when you type a URL. The demo adds a login link,
 * `/durable/login?key=...`, that checks the key, keeps it in an HttpOnly, SameSite=Strict cookie scoped
 * to `/durable`, and redirects to the inspector; a middleware then hands the cookie to the guard as the
 * `x-api-key` header. The guard is still the library's: this only carries the key. (The page's action
 * buttons send JSON with `credentials: 'same-origin'`, so they work with the cookie too; the admin module
 * refuses non-JSON actions, and SameSite=Strict keeps other sites' requests from carrying the cookie.)
 */
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { INestApplication } from '@nestjs/common';
import { ADMIN_PATH, type DemoAdminAccess } from './admin-access';

export const KEY_COOKIE = 'durable_admin_key';

function cookie(req: IncomingMessage, name: string): string | undefined {
  for (const part of String(req.headers.cookie ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return decodeURIComponent(part.slice(i + 1).trim());
  }
  return undefined;
}

const same = (a: string, b: string) =>
  a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

/** Installs the login link and the cookie hand-over. Call before `app.init()` / `app.listen()`. */
export function installBrowserLogin(app: INestApplication, access: DemoAdminAccess): void {
  const key = access.key;
  if (!key) return; // anonymous: nothing to carry
  const base = `/${ADMIN_PATH}`;
  app.use((req: IncomingMessage, res: ServerResponse, next: () => void) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.pathname !== base && !url.pathname.startsWith(`${base}/`)) return next();
    if (url.pathname === `${base}/login` && req.method === 'GET') {
      const given = url.searchParams.get('key') ?? '';
      if (!same(given, key)) {
        res.writeHead(401, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' });
        res.end('Unknown key: open the login link the demo printed at start-up.\n');
        return;
      }
      res.writeHead(303, {
        location: base,
        'cache-control': 'no-store',
        'referrer-policy': 'no-referrer',
        'set-cookie': `${KEY_COOKIE}=${encodeURIComponent(key)}; Path=${base}; HttpOnly; SameSite=Strict; Max-Age=43200`,
      });
      res.end();
      return;
    }
    const fromCookie = cookie(req, KEY_COOKIE);
    if (fromCookie && !req.headers['x-api-key'] && !req.headers.authorization) {
      req.headers['x-api-key'] = fromCookie;
    }
    next();
  });
}
