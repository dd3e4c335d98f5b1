import { INestApplication } from '@nestjs/common';
import { createHmac } from 'node:crypto';
import { ApiKeyAdminGuard, DURABLE_ADMIN_SESSION_COOKIE, DurableAdminModule } from '../../src/admin';
import { tokenHash } from '../../src/admin/login/admin-session';
import { bootHttpApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * Issue 36, part 5 (security review): the API key header is limited like the sign-in page. Wrong keys
 * (header or Bearer) are logged with their count and, after 10 in 5 minutes, every key from that client
 * address is a 429 with Retry-After (the right one too), without a log line per refused request; the
 * sign-in page shares the count. A forged X-Forwarded-For changes nothing unless the app trusts its
 * proxy (`trust proxy`), which then tells clients apart. And the sessions table holds nothing a reader
 * can test key guesses against offline.
 */
const OPS_KEY = 'throttle-ops-key-0123456789';
const OTHER_KEY = 'throttle-other-key-0123456789';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('admin_key_throttle');
});
afterAll(async () => {
  await db?.drop();
});

/** An app with the guard and the sign-in page; its warnings in `lines`. */
async function boot(lines: string[], keys: Record<string, string> = { [OPS_KEY]: 'alice' }) {
  const logger = {
    log: () => undefined,
    error: () => undefined,
    warn: (m: unknown) => void lines.push(String(m)),
  };
  const { app, http } = await bootHttpApp(db.url, {
    imports: [
      DurableAdminModule.forRoot({
        path: 'durable',
        guard: new ApiKeyAdminGuard({ keys }),
        login: true,
        observability: false,
      }),
    ],
    logger: logger as never,
  });
  return { app, base: `${http}/durable` };
}

const api = (base: string, headers: Record<string, string>) => fetch(`${base}/api/runs`, { headers });
const signIn = (base: string, key: string) =>
  fetch(`${base}/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ key }).toString(),
  });

describe('wrong API keys are limited per client', () => {
  let app: INestApplication;
  afterEach(async () => {
    await app?.close();
  });

  it('the eleventh wrong key in five minutes is a 429 with Retry-After, even the right key; logged, never flooding', async () => {
    const lines: string[] = [];
    const booted = await boot(lines);
    app = booted.app;
    const { base } = booted;
    expect((await api(base, { 'x-api-key': OPS_KEY })).status).toBe(200);
    for (let i = 1; i <= 10; i++) {
      const headers: Record<string, string> =
        i % 2
          ? { 'x-api-key': `wrong-key-${i}-0123456789` }
          : { authorization: `Bearer wrong-key-${i}-0123456789` };
      expect((await api(base, headers)).status).toBe(401);
    }
    const limited = await api(base, { 'x-api-key': 'wrong-key-11-0123456789' });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(200);
    expect(await limited.json()).toMatchObject({
      statusCode: 429,
      message: expect.stringContaining('try again'),
    });
    expect((await api(base, { 'x-api-key': OPS_KEY })).status).toBe(429);
    // The sign-in page shares the count: it is locked for this client too.
    expect((await signIn(base, OPS_KEY)).status).toBe(429);

    // A flood while locked: every answer a 429, a few log lines.
    const flood = await Promise.all(
      Array.from({ length: 300 }, (_, i) => api(base, { 'x-api-key': `flood-${i}-0123456789abcdef` })),
    );
    expect(new Set(flood.map((r) => r.status))).toEqual(new Set([429]));
    const wrong = lines.filter((l) => l.includes('admin API request with an unknown key'));
    expect(wrong).toHaveLength(10);
    expect(wrong[9]).toContain('(10 in the last 5 min');
    const refused = lines.filter((l) => l.includes('admin API key refused'));
    expect(refused.length).toBeGreaterThanOrEqual(1);
    expect(refused.length).toBeLessThanOrEqual(5);
    const all = lines.join('\n');
    expect(all).not.toContain('wrong-key-');
    expect(all).not.toContain('flood-');
    expect(all).not.toContain(OPS_KEY);
  });

  it('wrong keys at the sign-in page lock the header too', async () => {
    const booted = await boot([]);
    app = booted.app;
    for (let i = 1; i <= 10; i++)
      expect((await signIn(booted.base, `wrong-${i}-0123456789abc`)).status).toBe(401);
    expect((await api(booted.base, { 'x-api-key': OPS_KEY })).status).toBe(429);
  });

  it('a forged X-Forwarded-For escapes nothing; behind a trusted proxy each client has its own count', async () => {
    const booted = await boot([]);
    app = booted.app;
    const { base } = booted;
    for (let i = 1; i <= 10; i++)
      await api(base, { 'x-api-key': `wrong-${i}-0123456789abc`, 'x-forwarded-for': `10.0.0.${i}` });
    expect((await api(base, { 'x-api-key': OPS_KEY, 'x-forwarded-for': '10.9.9.9' })).status).toBe(429);

    const trusting = await boot([]);
    await app.close();
    app = trusting.app;
    app.getHttpAdapter().getInstance().set('trust proxy', 'loopback');
    const as = (ip: string, key: string) => api(trusting.base, { 'x-api-key': key, 'x-forwarded-for': ip });
    for (let i = 1; i <= 10; i++)
      expect((await as('203.0.113.7', `wrong-${i}-0123456789abc`)).status).toBe(401);
    expect((await as('203.0.113.7', OPS_KEY)).status).toBe(429);
    expect((await as('198.51.100.2', OPS_KEY)).status).toBe(200);
  });
});

describe('wrong API keys are limited in all', () => {
  it('past 100 wrong keys in five minutes from any addresses, every address is a 429 but one that signed in lately', async () => {
    const lines: string[] = [];
    const booted = await boot(lines);
    try {
      booted.app.getHttpAdapter().getInstance().set('trust proxy', 'loopback');
      const as = (ip: string, key: string) => api(booted.base, { 'x-api-key': key, 'x-forwarded-for': ip });
      expect((await as('198.51.100.2', OPS_KEY)).status).toBe(200); // an operator, before the guesses
      // 10 addresses, 10 wrong keys each: none passes its own limit.
      for (let a = 1; a <= 10; a++)
        for (let i = 1; i <= 10; i++)
          expect((await as(`203.0.113.${a}`, `wrong-${a}-${i}-0123456789abc`)).status).toBe(401);
      // An 11th address: refused before its first guess is checked, the right key as well.
      const fresh = await as('203.0.113.77', 'wrong-77-0123456789abc');
      expect(fresh.status).toBe(429);
      expect(Number(fresh.headers.get('retry-after'))).toBeGreaterThan(200);
      expect(await fresh.json()).toMatchObject({ message: expect.stringContaining('from all addresses') });
      expect((await as('203.0.113.78', OPS_KEY)).status).toBe(429);
      // The operator who gave a right key lately goes on; so do sessions of the sign-in page.
      expect((await as('198.51.100.2', OPS_KEY)).status).toBe(200);
      const flood = await Promise.all(
        Array.from({ length: 200 }, (_, i) => as(`192.0.2.${i % 250}`, `flood-${i}-0123456789abcdef`)),
      );
      expect(new Set(flood.map((r) => r.status))).toEqual(new Set([429]));
      const all = lines.filter((l) => l.includes('from all addresses'));
      expect(all.length).toBeGreaterThanOrEqual(1);
      expect(all.length).toBeLessThanOrEqual(5);
      expect(lines.join('\n')).not.toContain('flood-');
    } finally {
      await booted.app.close();
    }
  });
});

describe('the sessions table', () => {
  it('holds nothing to test key guesses against offline; a session opens one key in O(1), reordered keys end it', async () => {
    const booted = await boot([], { [OTHER_KEY]: 'bob', [OPS_KEY]: 'alice' });
    let token: string;
    try {
      const res = await signIn(booted.base, OPS_KEY);
      expect(res.status).toBe(303);
      token = res.headers
        .get('set-cookie')!
        .split(';')[0]
        .slice(DURABLE_ADMIN_SESSION_COOKIE.length + 1);
      const cookie = `${DURABLE_ADMIN_SESSION_COOKIE}=${token}`;
      expect((await api(booted.base, { cookie })).status).toBe(200);
      const [row] = await db.query(`select * from ai_admin_sessions where token_hash = $1`, [
        tokenHash(token),
      ]);
      // The old reference, HMAC-SHA256(salt, key), let a reader of the table check a guessed key.
      for (const guess of [OPS_KEY, OTHER_KEY])
        expect(row.key_ref).not.toBe(createHmac('sha256', row.salt).update(guess).digest('hex'));
      expect(JSON.stringify(row)).not.toContain(OPS_KEY);
      expect(JSON.stringify(row)).not.toContain(token);
      // A session row made by the old scheme (after an upgrade) opens nothing.
      const old = 'A'.repeat(43);
      await db.query(
        `insert into ai_admin_sessions (token_hash, operator, key_ref, salt, expires_at)
         values ($1, 'alice', $2, 'oldsalt', now() + interval '1 hour')`,
        [tokenHash(old), createHmac('sha256', 'oldsalt').update(OPS_KEY).digest('hex')],
      );
      const oldCookie = `${DURABLE_ADMIN_SESSION_COOKIE}=${old}`;
      expect((await api(booted.base, { cookie: oldCookie })).status).toBe(401);
    } finally {
      await booted.app.close();
    }
    // Another pod with the same keys in the same order accepts it; with the keys reordered it does not.
    const same = await boot([], { [OTHER_KEY]: 'bob', [OPS_KEY]: 'alice' });
    const reordered = await boot([], { [OPS_KEY]: 'alice', [OTHER_KEY]: 'bob' });
    try {
      const cookie = `${DURABLE_ADMIN_SESSION_COOKIE}=${token}`;
      expect((await api(same.base, { cookie })).status).toBe(200);
      expect((await api(reordered.base, { cookie })).status).toBe(401);
    } finally {
      await same.app.close();
      await reordered.app.close();
    }
  });
});
