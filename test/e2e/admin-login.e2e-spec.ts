import { CanActivate, Controller, Get, INestApplication, Injectable } from '@nestjs/common';
import type { Browser } from 'playwright-core';
import { DurableWorkflow, InvalidOptionsError, RunContext, RunRepository } from '../../src';
import {
  ApiKeyAdminGuard,
  DURABLE_ADMIN_CSRF_HEADER,
  DURABLE_ADMIN_SESSION_COOKIE,
  DurableAdminModule,
} from '../../src/admin';
import { tokenHash } from '../../src/admin/login/admin-session';
import { bootHttpApp } from '../helpers/app';
import { describeWithBrowser, launchChromium } from '../helpers/browser';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * The admin module's sign-in page (`login: true`) for ApiKeyAdminGuard: the form, the session cookie and
 * its flags, the cookie accepted like the header, actions signed in by cookie refused from other sites,
 * a damaged cookie a 401 on its own request only, and the sign-out.
 */
const OPS_KEY = 'login-ops-key-0123456789';
const VIEW_KEY = 'login-view-key-0123456789';
const COOKIE = DURABLE_ADMIN_SESSION_COOKIE;

@DurableWorkflow('login-waiter')
class WaiterWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    return { got: await ctx.waitForSignal('go') };
  }
}

/** One of the app's own routes, outside the admin path. */
@Controller('hello')
class HelloController {
  @Get()
  hello() {
    return { hello: 'world' };
  }
}

@Injectable()
class OpenGuard implements CanActivate {
  canActivate() {
    return true;
  }
}

const form = (key: string, headers: Record<string, string> = {}): RequestInit => ({
  method: 'POST',
  redirect: 'manual',
  headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
  body: new URLSearchParams({ key }).toString(),
});

describe('admin sign-in page (login: true)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let origin: string;
  let base: string;
  let runs: RunRepository;
  let jar: string; // `durable_admin_session=...` of OPS_KEY

  const signIn = async (key: string, headers: Record<string, string> = {}) =>
    fetch(`${base}/login`, form(key, headers));
  const cancel = (runId: string, headers: Record<string, string>) =>
    fetch(`${base}/api/runs/${runId}/cancel`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ reason: 'csrf?' }),
    });

  beforeAll(async () => {
    db = await createTestDatabase('admin_login');
    const booted = await bootHttpApp(db.url, {
      imports: [
        DurableAdminModule.forRoot({
          path: 'durable',
          guard: new ApiKeyAdminGuard({
            keys: { [OPS_KEY]: 'alice', [VIEW_KEY]: { operator: 'bob', readOnly: true } },
          }),
          login: true,
        }),
      ],
      providers: [WaiterWorkflow],
      controllers: [HelloController],
      logger: [],
    });
    app = booted.app;
    origin = booted.http;
    base = `${origin}/durable`;
    runs = app.get(RunRepository);
    const res = await signIn(OPS_KEY);
    jar = res.headers.get('set-cookie')!.split(';')[0];
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('is off by default, and only for ApiKeyAdminGuard', async () => {
    const plain = await bootHttpApp(db.url, {
      imports: [
        DurableAdminModule.forRoot({
          guard: new ApiKeyAdminGuard({ keys: { [OPS_KEY]: 'alice' } }),
          observability: false,
        }),
      ],
      logger: [],
    });
    try {
      expect((await fetch(`${plain.http}/durable/login`)).status).toBe(404);
      expect((await fetch(`${plain.http}/durable/login`, form(OPS_KEY))).status).toBe(404);
    } finally {
      await plain.app.close();
    }
    expect(() => DurableAdminModule.forRoot({ guard: OpenGuard, login: true })).toThrow(InvalidOptionsError);
    expect(() => DurableAdminModule.forRoot({ guard: OpenGuard, login: true })).toThrow(
      /login works with ApiKeyAdminGuard only/,
    );
    expect(() => DurableAdminModule.forRoot({ allowAnonymous: true, login: true })).toThrow(
      /login needs guard/,
    );
    expect(() =>
      DurableAdminModule.forRoot({
        guard: new ApiKeyAdminGuard({ keys: { [OPS_KEY]: 'alice' } }),
        login: { sessionTtlMs: 0 },
      }),
    ).toThrow(/login.sessionTtlMs must be an integer of at least 1000 ms/);
  });

  it('GET login is a form; a wrong key is a 401 without a cookie; the key sets an HttpOnly, SameSite=Strict cookie on the admin path', async () => {
    const page = await fetch(`${base}/login`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    expect(page.headers.get('cache-control')).toBe('no-store');
    expect(page.headers.get('content-security-policy')).toMatch(/frame-ancestors 'none'/);
    expect(page.headers.get('content-security-policy')).toMatch(/form-action 'self'/);
    const html = await page.text();
    expect(html).toContain('action="/durable/login"');
    expect(html).toContain('name="key" type="password"');

    const wrong = await signIn('not-a-key-0123456789');
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('set-cookie')).toBeNull();
    expect(await wrong.text()).toContain('Unknown API key.');
    const empty = await signIn('');
    expect(empty.status).toBe(400);
    expect(empty.headers.get('set-cookie')).toBeNull();

    const ok = await signIn(OPS_KEY);
    expect(ok.status).toBe(303);
    expect(ok.headers.get('location')).toBe('/durable');
    const cookie = ok.headers.get('set-cookie')!;
    const attrs = cookie.split('; ');
    expect(attrs[0]).toMatch(new RegExp(`^${COOKIE}=[A-Za-z0-9_-]{43}$`));
    expect(cookie).not.toContain(OPS_KEY);
    expect(attrs).toEqual(
      expect.arrayContaining(['Path=/durable', 'HttpOnly', 'SameSite=Strict', 'Max-Age=43200']),
    );
    expect(attrs).not.toContain('Secure'); // plain http
    // A JSON body is taken too (a script signing in).
    const json = await fetch(`${base}/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ key: OPS_KEY }),
    });
    expect(json.status).toBe(303);
  });

  it('Secure when the request is https: X-Forwarded-Proto counts only when the app trusts the proxy', async () => {
    const proto = { 'x-forwarded-proto': 'https' };
    const untrusted = (await signIn(OPS_KEY, proto)).headers.get('set-cookie')!;
    expect(untrusted.split('; ')).not.toContain('Secure');
    const express = app.getHttpAdapter().getInstance();
    express.set('trust proxy', true);
    try {
      const trusted = await signIn(OPS_KEY, proto);
      expect(trusted.headers.get('set-cookie')!.split('; ')).toContain('Secure');
      const out = await fetch(`${base}/logout`, { method: 'POST', redirect: 'manual', headers: proto });
      expect(out.headers.get('set-cookie')!.split('; ')).toContain('Secure');
    } finally {
      express.set('trust proxy', false);
    }
  });

  it('the cookie opens the API and the pages like the header, as the key holder', async () => {
    const { run } = await runs.start('login-waiter', {});
    const list = await fetch(`${base}/api/runs`, { headers: { cookie: jar } });
    expect(list.status).toBe(200);
    const page = await fetch(`${base}/runs/${run.id}`, { headers: { cookie: jar } });
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('operator: <b>alice</b>');
    expect(html).toContain('action="/durable/logout"'); // the sign-out button
    expect(html).toContain(`'${DURABLE_ADMIN_CSRF_HEADER}': '1'`); // the buttons send the header
    const acted = await cancel(run.id, { cookie: jar, [DURABLE_ADMIN_CSRF_HEADER]: '1' });
    expect(acted.status).toBe(200);
    expect(((await acted.json()) as { by: string }).by).toBe('alice');
    expect((await runs.get(run.id))!.status).toBe('cancelled');

    // A read-only key's session reads, and may not act.
    const viewer = (await signIn(VIEW_KEY)).headers.get('set-cookie')!.split(';')[0];
    const { run: other } = await runs.start('login-waiter', {});
    expect((await fetch(`${base}/api/runs/${other.id}`, { headers: { cookie: viewer } })).status).toBe(200);
    const denied = await cancel(other.id, { cookie: viewer, [DURABLE_ADMIN_CSRF_HEADER]: '1' });
    expect(denied.status).toBe(403);
    expect((await runs.get(other.id))!.status).toBe('pending');
  });

  it('an action signed in by cookie needs the X-Durable-Admin header and a same-origin request; a cross-site form changes nothing', async () => {
    const { run } = await runs.start('login-waiter', {});
    const h = DURABLE_ADMIN_CSRF_HEADER;
    const refused: Array<[string, Record<string, string>]> = [
      ['no header', { cookie: jar }],
      ['empty header', { cookie: jar, [h]: '' }],
      ['cross-site fetch', { cookie: jar, [h]: '1', 'sec-fetch-site': 'cross-site' }],
      ['same-site fetch', { cookie: jar, [h]: '1', 'sec-fetch-site': 'same-site' }],
      ['other origin', { cookie: jar, [h]: '1', origin: 'https://evil.example' }],
      ['null origin', { cookie: jar, [h]: '1', origin: 'null' }],
    ];
    for (const [what, headers] of refused) {
      const res = await cancel(run.id, headers);
      expect({ what, status: res.status }).toEqual({ what, status: 403 });
    }
    // What a form on another site can send: no custom header, not JSON.
    const crossForm = await fetch(`${base}/api/runs/${run.id}/cancel`, {
      method: 'POST',
      headers: {
        cookie: jar,
        'content-type': 'application/x-www-form-urlencoded',
        origin: 'https://evil.example',
        'sec-fetch-site': 'cross-site',
      },
      body: 'reason=csrf',
    });
    expect([403, 415]).toContain(crossForm.status);
    expect((await runs.get(run.id))!.status).toBe('pending');
    expect((await runs.events(run.id)).map((e) => e.type)).not.toContain('run.cancel_requested');

    // The inspector's own request: same origin, with the header.
    const own = await cancel(run.id, {
      cookie: jar,
      [h]: '1',
      'sec-fetch-site': 'same-origin',
      origin,
    });
    expect(own.status).toBe(200);
    // The header key alone needs neither (scripts and curl).
    const { run: second } = await runs.start('login-waiter', {});
    expect((await cancel(second.id, { 'x-api-key': OPS_KEY })).status).toBe(200);
  });

  it('X-Forwarded-Host names this site only when the app trusts the proxy that sends it', async () => {
    const { run } = await runs.start('login-waiter', {});
    const h = DURABLE_ADMIN_CSRF_HEADER;
    // Anyone can send the header: without `trust proxy` it does not make another origin this site.
    const forged = { origin: 'https://evil.example', 'x-forwarded-host': 'evil.example' };
    expect((await cancel(run.id, { cookie: jar, [h]: '1', ...forged })).status).toBe(403);
    const signedIn = await signIn(OPS_KEY, forged);
    expect(signedIn.status).toBe(403);
    expect(signedIn.headers.get('set-cookie')).toBeNull();
    expect((await runs.get(run.id))!.status).toBe('pending');
    const express = app.getHttpAdapter().getInstance();
    express.set('trust proxy', 'loopback');
    try {
      // Behind a proxy the app trusts, the host it forwards is the one the browser saw.
      const proxied = { origin: 'https://admin.example', 'x-forwarded-host': 'admin.example' };
      expect((await signIn(OPS_KEY, proxied)).status).toBe(303);
      expect((await cancel(run.id, { cookie: jar, [h]: '1', ...proxied })).status).toBe(200);
    } finally {
      express.set('trust proxy', false);
    }
  });

  it('sign-in and sign-out posted from another site are refused', async () => {
    const crossSite: Array<Record<string, string>> = [
      { 'sec-fetch-site': 'cross-site' },
      { origin: 'https://evil.example' },
    ];
    for (const headers of crossSite) {
      const res = await signIn(OPS_KEY, headers);
      expect(res.status).toBe(403);
      expect(res.headers.get('set-cookie')).toBeNull();
      const out = await fetch(`${base}/logout`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie: jar, ...headers },
      });
      expect(out.status).toBe(403);
      expect(out.headers.get('set-cookie')).toBeNull();
    }
    const same = await signIn(OPS_KEY, { 'sec-fetch-site': 'same-origin', origin });
    expect(same.status).toBe(303);
  });

  it('a damaged, expired or foreign cookie is a 401 on its own request, never a 500, and other routes are untouched', async () => {
    const { run } = await runs.start('login-waiter', {});
    // A session that expired on the server (its row says so, whatever the cookie's Max-Age).
    const expiredJar = (await signIn(OPS_KEY)).headers.get('set-cookie')!.split(';')[0];
    await db.query(
      `update ai_admin_sessions set expires_at = now() - interval '1 second' where token_hash = $1`,
      [tokenHash(expiredJar.slice(COOKIE.length + 1))],
    );
    const cookies = {
      'bad percent-encoding': `${COOKIE}=%E0%A4%A`,
      garbage: `${COOKIE}=<script>"; ;;`,
      empty: `${COOKIE}=`,
      'no value': COOKIE,
      'the key itself': `${COOKIE}=${OPS_KEY}`,
      'truncated mac': `${jar.slice(0, -4)}`,
      'a token never issued': `${COOKIE}=${'A'.repeat(43)}`,
      expired: expiredJar,
      'an old signed cookie': `${COOKIE}=v1.99999999999.${'A'.repeat(43)}`,
      unicode: `${COOKIE}=${'é'.repeat(43)}`,
      long: `${COOKIE}=${'x'.repeat(4000)}`,
    };
    for (const [what, cookie] of Object.entries(cookies)) {
      const api = await fetch(`${base}/api/runs/${run.id}`, { headers: { cookie } });
      expect({ what, api: api.status }).toEqual({ what, api: 401 });
      const action = await cancel(run.id, { cookie, [DURABLE_ADMIN_CSRF_HEADER]: '1' });
      expect({ what, action: action.status }).toEqual({ what, action: 401 });
      // A browser asking for the page gets the sign-in form, still a 401.
      const page = await fetch(`${base}/runs/${run.id}`, { headers: { cookie, accept: 'text/html' } });
      expect({ what, page: page.status }).toEqual({ what, page: 401 });
      expect(await page.text()).toContain('data-testid="login-form"');
      // Nothing else minds the cookie: the sign-in page, health, the app's own routes, a header key.
      expect((await fetch(`${base}/login`, { headers: { cookie } })).status).toBe(200);
      expect((await fetch(`${base}/health`, { headers: { cookie } })).status).toBe(200);
      expect((await fetch(`${origin}/hello`, { headers: { cookie } })).status).toBe(200);
      const withKey = await fetch(`${base}/api/runs/${run.id}`, {
        headers: { cookie, 'x-api-key': OPS_KEY },
      });
      expect({ what, withKey: withKey.status }).toEqual({ what, withKey: 200 });
    }
    // A good session next to a damaged one still counts (two cookies of one name on nested paths).
    const both = await fetch(`${base}/api/runs/${run.id}`, { headers: { cookie: `${COOKIE}=junk; ${jar}` } });
    expect(both.status).toBe(200);
    expect((await runs.get(run.id))!.status).toBe('pending');
  });

  it('sessions are random and kept on the server: two sign-ins in one second differ, and nothing stored or sent reveals the key', async () => {
    const [a, b] = await Promise.all([signIn(OPS_KEY), signIn(OPS_KEY)]);
    const ta = a.headers
      .get('set-cookie')!
      .split(';')[0]
      .slice(COOKIE.length + 1);
    const tb = b.headers
      .get('set-cookie')!
      .split(';')[0]
      .slice(COOKIE.length + 1);
    expect(ta).not.toBe(tb);
    const rows = await db.query(`select * from ai_admin_sessions where token_hash = any($1)`, [
      [tokenHash(ta), tokenHash(tb)],
    ]);
    expect(rows).toHaveLength(2);
    for (const row of rows) {
      expect(row.operator).toBe('alice');
      expect(JSON.stringify(row)).not.toContain(OPS_KEY);
      expect(JSON.stringify(row)).not.toContain(ta);
      expect(row.key_ref).toMatch(/^[0-9a-f]{64}$/);
    }
    expect(rows[0].salt).not.toBe(rows[1].salt);
    // The API key changes: its sessions end (the stored reference matches no key of the new guard).
    const rotated = await bootHttpApp(db.url, {
      imports: [
        DurableAdminModule.forRoot({
          path: 'durable',
          guard: new ApiKeyAdminGuard({ keys: { 'rotated-ops-key-0123456789': 'alice' } }),
          login: true,
          observability: false,
        }),
      ],
      logger: [],
    });
    try {
      const cookie = `${COOKIE}=${ta}`;
      expect((await fetch(`${rotated.http}/durable/api/runs`, { headers: { cookie } })).status).toBe(401);
      expect((await fetch(`${base}/api/runs`, { headers: { cookie } })).status).toBe(200);
    } finally {
      await rotated.app.close();
    }
  });

  it('a shorter configured TTL ends the older sessions it no longer allows', async () => {
    const cookie = (await signIn(OPS_KEY)).headers.get('set-cookie')!.split(';')[0];
    const short = await bootHttpApp(db.url, {
      imports: [
        DurableAdminModule.forRoot({
          path: 'durable',
          guard: new ApiKeyAdminGuard({ keys: { [OPS_KEY]: 'alice' } }),
          login: { sessionTtlMs: 1000 },
          observability: false,
        }),
      ],
      logger: [],
    });
    try {
      await new Promise((r) => setTimeout(r, 1200));
      expect((await fetch(`${short.http}/durable/api/runs`, { headers: { cookie } })).status).toBe(401);
      expect((await fetch(`${base}/api/runs`, { headers: { cookie } })).status).toBe(200); // 12 h here
    } finally {
      await short.app.close();
    }
  });

  it('wrong keys are logged and limited per client: the eleventh in five minutes is a 429, even with the right key', async () => {
    const lines: string[] = [];
    const logger = {
      log: () => undefined,
      error: () => undefined,
      warn: (m: unknown) => void lines.push(String(m)),
    };
    const guarded = await bootHttpApp(db.url, {
      imports: [
        DurableAdminModule.forRoot({
          path: 'durable',
          guard: new ApiKeyAdminGuard({ keys: { [OPS_KEY]: 'alice' } }),
          login: true,
          observability: false,
        }),
      ],
      logger: logger as never,
    });
    try {
      const at = `${guarded.http}/durable/login`;
      for (let i = 1; i <= 10; i++)
        expect((await fetch(at, form(`wrong-key-${i}-0123456789`))).status).toBe(401);
      const limited = await fetch(at, form('wrong-key-11-0123456789'));
      expect(limited.status).toBe(429);
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(200);
      expect((await fetch(at, form(OPS_KEY))).status).toBe(429);
      const wrong = lines.filter((l) => l.includes('admin sign-in with an unknown key'));
      expect(wrong).toHaveLength(10);
      expect(wrong[9]).toContain('(10 in the last 5 min)');
      expect(lines.some((l) => l.includes('too many wrong keys'))).toBe(true);
      expect(lines.join('\n')).not.toContain('wrong-key-'); // keys are never logged
    } finally {
      await guarded.app.close();
    }
  });

  it('sign-out clears the cookie on the admin path, and ends the session on the server', async () => {
    const out = await fetch(`${base}/logout`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: jar },
    });
    expect(out.status).toBe(303);
    expect(out.headers.get('location')).toBe('/durable/login');
    expect(out.headers.get('set-cookie')!.split('; ')).toEqual(
      expect.arrayContaining([`${COOKIE}=`, 'Path=/durable', 'Max-Age=0', 'HttpOnly', 'SameSite=Strict']),
    );
    // The old cookie, replayed after the sign-out, opens nothing.
    expect((await fetch(`${base}/api/runs`, { headers: { cookie: jar } })).status).toBe(401);
    jar = (await signIn(OPS_KEY)).headers.get('set-cookie')!.split(';')[0];
  });

  describeWithBrowser('in a browser (headless Chromium)', () => {
    let browser: Browser;
    beforeAll(async () => {
      browser = await launchChromium();
    });
    afterAll(async () => {
      await browser?.close();
    });

    it('a link with the key in its fragment fills the form; signing in opens the inspector, whose buttons act by cookie; sign-out ends it', async () => {
      const { run } = await runs.start('login-waiter', {});
      const context = await browser.newContext();
      const page = await context.newPage();
      const problems: string[] = [];
      page.on('pageerror', (err) => problems.push(err.message));
      page.on('console', (msg) => msg.type() === 'error' && problems.push(msg.text()));

      await page.goto(`${base}/runs/${run.id}`);
      expect(await page.getByTestId('login-form').count()).toBe(1); // the 401 shows the form
      problems.length = 0; // the browser logs that 401

      await page.goto(`${base}/login#key=${OPS_KEY}`);
      expect(await page.locator('#key').inputValue()).toBe(OPS_KEY);
      expect(page.url()).toBe(`${base}/login`); // the key left the address bar
      await page.locator('button[type=submit]').click();
      await page.waitForURL(base);
      await page.locator(`[data-run-id="${run.id}"]`).waitFor();
      const [cookie] = await context.cookies();
      expect(cookie).toMatchObject({ name: COOKIE, path: '/durable', httpOnly: true, sameSite: 'Strict' });

      await page.goto(`${base}/runs/${run.id}`);
      await page.locator('input[name=reason]').fill('from the page');
      await page.locator('button[data-action=cancel]').click();
      await page.locator('#flash.ok').filter({ hasText: 'cancel recorded (by alice)' }).waitFor();
      expect((await runs.get(run.id))!.status).toBe('cancelled');

      await page.locator('header button[type=submit]').click(); // Sign out
      await page.waitForURL(`${base}/login`);
      expect(await context.cookies()).toEqual([]);
      expect(problems).toEqual([]);
      await context.close();
    });
  });
});
