import { PAGE_SCRIPT } from './page-script';

/** Escapes text for HTML content and attribute values. Every value from the database goes through it. */
export function esc(value: unknown): string {
  return String(value ?? '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** A tagged template whose `${}` values are escaped, except values already made with `raw()`. */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Raw {
  let out = strings[0];
  values.forEach((v, i) => {
    out += renderValue(v) + strings[i + 1];
  });
  return new Raw(out);
}

/** Markup that must not be escaped again. */
export class Raw {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

/** Trusted markup (built by `html`, or a constant). */
export const raw = (value: string): Raw => new Raw(value);

function renderValue(v: unknown): string {
  if (v instanceof Raw) return v.value;
  if (Array.isArray(v)) return v.map(renderValue).join('');
  if (v === null || v === undefined || v === false) return '';
  return esc(v);
}

/** `2026-01-02T03:04:05.678Z` → `2026-01-02 03:04:05.678` (UTC, to the millisecond). */
export function ts(d: Date | string | null | undefined): string {
  if (!d) return '';
  return new Date(d).toISOString().replace('T', ' ').replace('Z', '');
}

/** A duration for humans: `840 ms`, `3.2 s`, `4 min 10 s`. */
export function dur(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** A status badge; the class picks its colour. */
export const badge = (status: string, testId?: string) =>
  html`<span class="badge s-${status}" ${testId ? raw(`data-testid="${esc(testId)}"`) : ''}>${status}</span>`;

/** The pages' one stylesheet (inline: the CSP allows inline styles, nothing from elsewhere). */
export const CSS = `
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2330;background:#f5f6f8}
header{background:#1f2330;color:#fff;padding:10px 24px;display:flex;gap:16px;align-items:center}
header a{color:#fff;text-decoration:none;font-weight:600}header .who{margin-left:auto;opacity:.8;font-size:13px}
main{padding:20px 24px;max-width:1280px}h1{font-size:20px;margin:0 0 4px}h2{font-size:15px;margin:24px 0 8px}
.card{background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:14px 16px;margin-bottom:14px}
table{width:100%;border-collapse:collapse;background:#fff}th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #eceef2;vertical-align:top}
th{font-size:12px;text-transform:uppercase;letter-spacing:.03em;color:#5b6275}td.num{text-align:right;font-variant-numeric:tabular-nums}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}a{color:#2456c7}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;background:#e6e8ee;color:#333}
.s-succeeded,.s-committed,.s-done,.s-approved{background:#dcf5e3;color:#146c2e}.s-failed,.s-rejected,.s-dead_lettered{background:#fde0e0;color:#a11}
.s-running{background:#dde9ff;color:#1d4fb8}.s-waiting,.s-awaiting_approval,.s-pending{background:#fff1cc;color:#7a5200}
.s-in_doubt,.s-interrupted,.s-held{background:#ffe2c6;color:#8a3c00}.s-cancelled{background:#eee;color:#555}
.counts{display:flex;gap:8px;flex-wrap:wrap;margin:10px 0 16px}.counts a{text-decoration:none}
.counts .c{background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:6px 12px}.counts .c b{font-size:18px;display:block}
.kv{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px}.kv div:nth-child(odd){color:#5b6275}
.epoch{border-left:4px solid #9aa3b5;background:#fff;border-radius:0 8px 8px 0;margin:10px 0;padding:8px 12px}
.epoch.w1{border-color:#3b82f6}.epoch.w2{border-color:#a855f7}.epoch.w3{border-color:#10b981}.epoch.w4{border-color:#f59e0b}
.epoch h3{margin:0 0 6px;font-size:14px}.epoch table td{border:0;padding:2px 8px}.epoch td:nth-child(-n+3){white-space:nowrap}
.takeover{background:#fff4e5;border:1px solid #f5b971;border-radius:8px;padding:8px 12px;margin:10px 0;color:#7a3d00}
.bar{height:8px;background:#7aa2f7;border-radius:4px;min-width:2px}
button{font:inherit;border:1px solid #b9c0cf;background:#fff;border-radius:6px;padding:4px 12px;cursor:pointer}
button.primary{background:#1d4fb8;border-color:#1d4fb8;color:#fff}button.danger{color:#a11;border-color:#e5a3a3}
button:disabled{opacity:.5;cursor:default}input,select{font:inherit;padding:3px 6px;border:1px solid #b9c0cf;border-radius:6px}
form.inline{display:inline-flex;gap:6px;align-items:center;margin:2px 0}
#flash{display:none;padding:8px 12px;border-radius:8px;margin-bottom:12px}#flash.ok{display:block;background:#dcf5e3}
#flash.err{display:block;background:#fde0e0}header form{margin:0}header button{color:#fff;background:none;border-color:#5b6275}.muted{color:#7b8294}.filters{display:flex;gap:8px;align-items:center;flex-wrap:wrap}
`;

/**
 * The page shell: header, flash area, content and the inline script (no external resources at all).
 * `signOut` adds a sign-out button (the admin module's `login`).
 */
export function layout(
  title: string,
  base: string,
  operator: string,
  body: Raw,
  data: Record<string, string> = {},
  signOut = false,
): string {
  const attrs = Object.entries(data)
    .map(([k, v]) => ` data-${k}="${esc(v)}"`)
    .join('');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${esc(title)}</title><style>${CSS}</style></head><body${attrs}>
<header><a href="${esc(base)}">Durable runs</a><span class="who">operator: <b>${esc(operator)}</b></span>${
    signOut
      ? `<form method="post" action="${esc(base)}/logout"><button type="submit">Sign out</button></form>`
      : ''
  }</header>
<main><div id="flash"></div>${body.value}</main><script>${PAGE_SCRIPT}</script></body></html>`;
}
