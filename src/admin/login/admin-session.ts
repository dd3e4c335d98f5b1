import { createHash, createHmac, randomBytes } from 'node:crypto';

/** The cookie the admin sign-in page sets (HttpOnly, SameSite=Strict, Path = the admin path). */
export const DURABLE_ADMIN_SESSION_COOKIE = 'durable_admin_session';

/**
 * The header a request signed in by cookie must carry to change a run (any non-empty value; the
 * inspector's buttons send `1`). A cross-site form cannot set a header, and a cross-site `fetch` that
 * sets one needs a CORS preflight the admin API never answers.
 */
export const DURABLE_ADMIN_CSRF_HEADER = 'x-durable-admin';

/** A session token as the cookie carries it: 32 random bytes, base64url. */
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

/** A new session token: random, unrelated to any key. @internal */
export function newSessionToken(): string {
  return randomBytes(32).toString('base64url');
}

/** Whether a cookie value has the shape of a session token (checked before any database read). @internal */
export function isSessionToken(value: string): boolean {
  return TOKEN.test(value);
}

/** What the server stores of a token: its SHA-256 (a read of the table gives no live session). @internal */
export function tokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/**
 * The stored reference to the key a session signed in with: HMAC-SHA256 under the session's token
 * (which the server never stores: only its hash) of the salt and the key. A reader of the table, who
 * has neither the token nor the key, cannot test a guessed key against it; the request that carries
 * the token checks it with one HMAC. @internal
 */
export function keyRef(token: string, salt: string, key: Buffer): Buffer {
  return createHmac('sha256', token).update(salt).update('\0').update(key).digest();
}

/** A session's stored "salt": the index of its key among the guard's keys, and random bytes. @internal */
export function newSalt(keyIndex: number): string {
  return `${keyIndex}.${randomBytes(16).toString('base64url')}`;
}

/** The key index a stored salt names, or undefined (a session of an older version, or damaged). @internal */
export function keyIndexOf(salt: string): number | undefined {
  const m = /^(\d{1,4})\.[A-Za-z0-9_-]{22}$/.exec(salt);
  return m ? Number(m[1]) : undefined;
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
 * The host this request was sent to: `Host`, or the first `X-Forwarded-Host` only when the app trusts
 * the proxy that sent it, as Express's `req.host` decides (`trust proxy`: the peer address passes the
 * app's trust function) and Fastify's `request.host` (`trustProxy`) does. Without that trust anyone can
 * send the header, so it would make any Origin "this site". @internal
 */
export function ownHost(req: any): string {
  const forwarded = header(req, 'x-forwarded-host');
  const trust = typeof req?.app?.get === 'function' ? req.app.get('trust proxy fn') : undefined;
  if (typeof trust === 'function') {
    // Express (4 and 5): the header counts when the peer is a trusted proxy.
    const peer = req.socket?.remoteAddress ?? req.connection?.remoteAddress;
    if (forwarded !== undefined && trust(peer, 0)) return forwarded.split(',')[0].trim();
    return header(req, 'host') ?? '';
  }
  // Fastify: `request.host` (v5; `hostname` in v4, with the port) honours its trustProxy option.
  if (req?.raw !== undefined) {
    const host = typeof req.host === 'string' ? req.host : req.hostname;
    if (typeof host === 'string' && host) return host;
  }
  return header(req, 'host') ?? '';
}

/**
 * Why this request looks cross-site, or undefined: `Sec-Fetch-Site` (every current browser sends it)
 * must be `same-origin` (or `none`, typed by the user); without it, an `Origin` header must name this
 * host (`ownHost`: `Host`, or `X-Forwarded-Host` from a proxy the app trusts). A request with neither
 * is not from a browser form. @internal
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
  const own = ownHost(req);
  return host && host === own ? undefined : `Origin ${origin} is not this site (${own})`;
}
