/** Headers on every admin response (API, pages, health): never cached, never content-sniffed. @internal */
export const ADMIN_RESPONSE_HEADERS: Readonly<Record<string, string>> = {
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
};

/** Sets ADMIN_RESPONSE_HEADERS on an Express response or a Fastify reply (a no-op on anything else). @internal */
export function setAdminResponseHeaders(response: unknown): void {
  const res = response as {
    headersSent?: boolean;
    sent?: boolean;
    setHeader?: (k: string, v: string) => void;
    header?: (k: string, v: string) => void;
  } | null;
  if (!res || res.headersSent || res.sent) return;
  for (const [k, v] of Object.entries(ADMIN_RESPONSE_HEADERS)) {
    if (typeof res.setHeader === 'function') res.setHeader(k, v);
    else if (typeof res.header === 'function') res.header(k, v);
  }
}
