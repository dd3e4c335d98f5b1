import { createHmac, timingSafeEqual } from 'node:crypto';

/** The cookie the admin sign-in page sets (HttpOnly, SameSite=Strict, Path = the admin path). */
export const DURABLE_ADMIN_SESSION_COOKIE = 'durable_admin_session';

/**
 * The header a request signed in by cookie must carry to change a run (any non-empty value; the
 * inspector's buttons send `1`). A cross-site form cannot set a header, and a cross-site `fetch` that
 * sets one needs a CORS preflight the admin API never answers.
 */
export const DURABLE_ADMIN_CSRF_HEADER = 'x-durable-admin';

const VERSION = 'v1';
const TOKEN = /^v1\.(\d{1,12})\.([A-Za-z0-9_-]{43})$/;

function mac(key: Buffer, expires: string): Buffer {
  return createHmac('sha256', key).update(`durable-admin-session.${VERSION}.${expires}`).digest();
}

/**
 * A session for the holder of `key`, valid until `expiresAtMs`: `v1.<expiry in s>.<HMAC-SHA256 keyed by
 * the API key>`. It holds neither the key nor anything that reveals it; changing the key ends it. @internal
 */
export function mintSession(key: Buffer, expiresAtMs: number): string {
  const expires = String(Math.floor(expiresAtMs / 1000));
  return `${VERSION}.${expires}.${mac(key, expires).toString('base64url')}`;
}

/**
 * The index in `keys` of the key that signed `token`, or -1 when it is malformed, expired or signed by
 * none of them. Never throws, whatever the token holds; compares in constant time. @internal
 */
export function verifySession(token: string, keys: Buffer[], nowMs = Date.now()): number {
  const m = TOKEN.exec(token);
  if (!m || Number(m[1]) * 1000 <= nowMs) return -1;
  const given = Buffer.from(m[2], 'base64url');
  if (given.length !== 32) return -1;
  let found = -1;
  keys.forEach((key, i) => {
    if (timingSafeEqual(mac(key, m[1]), given) && found < 0) found = i;
  });
  return found;
}

/** Every value of cookie `name` in the request's Cookie header, as sent (not decoded). @internal */
export function readCookies(req: any, name: string): string[] {
  const header = req?.headers?.cookie;
  const text = Array.isArray(header) ? header.join(';') : typeof header === 'string' ? header : '';
  const values: string[] = [];
  for (const part of text.split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) values.push(part.slice(i + 1).trim());
  }
  return values;
}

/** Whether the request came over https (Express `req.secure`, honouring `trust proxy`; Fastify `protocol`). @internal */
export function isHttps(req: any): boolean {
  return req?.secure === true || req?.protocol === 'https';
}

/** A `Set-Cookie` value for the session (empty with `maxAgeS` 0: the logout). @internal */
export function sessionCookie(value: string, path: string, maxAgeS: number, secure: boolean): string {
  return [
    `${DURABLE_ADMIN_SESSION_COOKIE}=${value}`,
    `Path=${path || '/'}`,
    `Max-Age=${maxAgeS}`,
    'HttpOnly',
    'SameSite=Strict',
    ...(secure ? ['Secure'] : []),
  ].join('; ');
}

const header = (req: any, name: string): string | undefined => {
  const v = req?.headers?.[name];
  return Array.isArray(v) ? v[0] : typeof v === 'string' ? v : undefined;
};

/**
 * Why this request looks cross-site, or undefined: `Sec-Fetch-Site` (every current browser sends it)
 * must be `same-origin` (or `none`, typed by the user); without it, an `Origin` header must name this
 * host (`X-Forwarded-Host` or `Host`). A request with neither is not from a browser form. @internal
 */
export function crossSiteProblem(req: any): string | undefined {
  const site = header(req, 'sec-fetch-site');
  if (site !== undefined) {
    return site === 'same-origin' || site === 'none' ? undefined : `Sec-Fetch-Site is ${site}`;
  }
  const origin = header(req, 'origin');
  if (origin === undefined) return undefined;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    return `Origin is ${origin}`;
  }
  const own = (header(req, 'x-forwarded-host') ?? header(req, 'host') ?? '').split(',')[0].trim();
  return host && host === own ? undefined : `Origin ${origin} is not this site (${own})`;
}
