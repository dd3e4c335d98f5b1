/** Failed sign-ins one client may make in a window before it is refused for the rest of it. */
export const LOGIN_FAILURES_ALLOWED = 10;
/** The window of LOGIN_FAILURES_ALLOWED. */
export const LOGIN_WINDOW_MS = 5 * 60_000;
/** Clients remembered at most (the oldest are forgotten first): a flood of addresses cannot grow it. */
const MAX_CLIENTS = 10_000;

/**
 * Limits failed sign-ins per client address (in this process): after LOGIN_FAILURES_ALLOWED wrong
 * keys in LOGIN_WINDOW_MS, every sign-in from that address is refused (429) until the window that
 * began with its first failure ends. A good key before that clears the count. ApiKeyAdminGuard keeps
 * one, which counts the wrong keys of its header and of the sign-in page together. @internal
 */
export class LoginThrottle {
  private readonly failures = new Map<string, { since: number; count: number; refused?: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Milliseconds until `client` may try again, or 0 when it may now. */
  retryAfterMs(client: string): number {
    const f = this.failures.get(client);
    if (!f) return 0;
    const left = f.since + LOGIN_WINDOW_MS - this.now();
    if (left <= 0) {
      this.failures.delete(client);
      return 0;
    }
    return f.count >= LOGIN_FAILURES_ALLOWED ? left : 0;
  }

  /** Counts a failed sign-in of `client`; returns how many it made in the current window. */
  failed(client: string): number {
    const f = this.failures.get(client);
    if (f && f.since + LOGIN_WINDOW_MS > this.now()) {
      f.count++;
      return f.count;
    }
    if (this.failures.size >= MAX_CLIENTS) this.failures.delete(this.failures.keys().next().value!);
    this.failures.set(client, { since: this.now(), count: 1 });
    return 1;
  }

  /** A good sign-in: the client's count starts over. */
  succeeded(client: string): void {
    if (this.failures.size) this.failures.delete(client);
  }

  /** Counts a refused attempt of a locked-out `client`: 1 for the first of its window, then 2, 3… */
  refused(client: string): number {
    const f = this.failures.get(client);
    if (!f) return 0;
    f.refused = (f.refused ?? 0) + 1;
    return f.refused;
  }
}

/** The client's address as logs show it (Express `req.ip`, honouring `trust proxy`; Fastify `ip`), JSON-quoted. @internal */
export function clientOf(req: any): string {
  const ip = typeof req?.ip === 'string' && req.ip ? req.ip : String(req?.socket?.remoteAddress ?? 'unknown');
  return JSON.stringify(ip.slice(0, 64));
}
