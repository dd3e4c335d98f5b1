import { createHash } from 'node:crypto';
import { CSS, esc } from '../page/html';

/**
 * The sign-in page's only script: a link `<path>/login#key=...` fills the field (the fragment never
 * reaches the server or its logs) and is then removed from the address bar. Submitting stays the
 * user's click: a page that signed in by itself could be made to sign someone in with another's key.
 */
export const LOGIN_SCRIPT = `(function () {
  var m = /^#key=(.+)$/.exec(location.hash), input = document.getElementById('key');
  if (!m || !input) return;
  try { input.value = decodeURIComponent(m[1]); } catch (e) { return; }
  history.replaceState(null, '', location.pathname + location.search);
})();`;

/** The sign-in page's CSP: nothing from elsewhere, its one script by hash, forms only to this origin, no framing. */
export const LOGIN_CSP = [
  "default-src 'none'",
  "style-src 'unsafe-inline'",
  `script-src 'sha256-${createHash('sha256').update(LOGIN_SCRIPT).digest('base64')}'`,
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** The headers of the sign-in page (and of every answer of the sign-in routes). */
export const LOGIN_PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Type': 'text/html; charset=utf-8',
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'Content-Security-Policy': LOGIN_CSP,
};

/** The sign-in form: one API key field, posted to `<base>/login`. `message` explains a refusal. */
export function renderLoginPage(base: string, message?: string): string {
  const note = message ? `<div id="flash" class="err" data-testid="login-error">${esc(message)}</div>` : '';
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Sign in · Durable runs</title><style>${CSS}</style></head><body>
<header><a href="${esc(base)}">Durable runs</a></header>
<main><div class="card" style="max-width:420px">${note}<h1>Sign in</h1>
<form method="post" action="${esc(base)}/login" data-testid="login-form">
<p><label for="key">API key</label><br><input id="key" name="key" type="password" autocomplete="current-password" required autofocus style="width:100%"></p>
<p><button type="submit" class="primary">Sign in</button></p></form>
<p class="muted">The key is checked and a session made from it is kept in a cookie for this page only.</p></div></main>
<script>${LOGIN_SCRIPT}</script></body></html>`;
}

/** The admin path as the browser sees it (global prefix included), from a request to `<it>/<leaf>`. @internal */
export function adminBaseOf(req: any, leaf: RegExp): string {
  const url: string = req?.originalUrl ?? req?.url ?? '/';
  return url.split('?')[0].replace(/\/+$/, '').replace(leaf, '');
}

/** Sends an answer on Express or Fastify. @internal */
export function send(res: any, status: number, headers: Record<string, string>, body = ''): void {
  if (typeof res.code === 'function') {
    res.code(status).headers(headers).send(body); // Fastify's reply
    return;
  }
  res.status(status);
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  res.send(body);
}
