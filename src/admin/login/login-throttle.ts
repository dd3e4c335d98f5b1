/** Failed sign-ins one client may make in a window before it is refused for the rest of it. */
export const LOGIN_FAILURES_ALLOWED = 10;
/** The window of LOGIN_FAILURES_ALLOWED. */
export const LOGIN_WINDOW_MS = 5 * 60_000;
/**
 * Failed sign-ins of all clients together in a window before every client is refused for the rest of
 * it, except those that signed in with a right key during it: one client per address is limited to
 * LOGIN_FAILURES_ALLOWED, but many addresses (a botnet, IPv6, a proxy not trusted per client) would
 * each get their own.
 */
export const LOGIN_FAILURES_ALLOWED_IN_ALL = 100;
/** Clients remembered at most (the oldest are forgotten first): a flood of addresses cannot grow it. */
const MAX_CLIENTS = 10_000;

/**
 * Limits failed sign-ins per client address (in this process): after LOGIN_FAILURES_ALLOWED wrong
 * keys in LOGIN_WINDOW_MS, every sign-in from that address is refused (429) until the window that
 * began with its first failure ends. A good key before that clears the count. And in all: after
 * LOGIN_FAILURES_ALLOWED_IN_ALL wrong keys from any addresses in a window, every address is refused
 * until that window ends, except one that signed in with a right key in the last LOGIN_WINDOW_MS (its
 * own limit still holds). ApiKeyAdminGuard keeps one, which counts the wrong keys of its header and of
 * the sign-in page together. @internal
 */
export class LoginThrottle {
  private readonly failures = new Map<string, { since: number; count: number; refused?: number }>();
  /** Wrong keys of all clients in the window that began at `since`; `refused` while it is full. */
  private all = { since: 0, count: 0, refused: 0 };
  /** Clients that gave a right key, and when: they pass the limit in all (not their own). */
  private readonly good = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Milliseconds until `client` may try again, or 0 when it may now. */
  retryAfterMs(client: string): number {
    return Math.max(this.ownWaitMs(client), this.allWaitMs(client));
  }

  /** Whether `client` is refused by the limit in all (not by its own): for the log. */
  refusedByAll(client: string): boolean {
    return this.ownWaitMs(client) === 0 && this.allWaitMs(client) > 0;
  }

  private ownWaitMs(client: string): number {
    const f = this.failures.get(client);
    if (!f) return 0;
    const left = f.since + LOGIN_WINDOW_MS - this.now();
    if (left <= 0) {
      this.failures.delete(client);
      return 0;
    }
    return f.count >= LOGIN_FAILURES_ALLOWED ? left : 0;
  }

  private allWaitMs(client: string): number {
    if (this.all.count < LOGIN_FAILURES_ALLOWED_IN_ALL) return 0;
    const left = this.all.since + LOGIN_WINDOW_MS - this.now();
    if (left <= 0) {
      this.all = { since: 0, count: 0, refused: 0 };
      return 0;
    }
    const at = this.good.get(client);
    return at !== undefined && at + LOGIN_WINDOW_MS > this.now() ? 0 : left;
  }

  /** Counts a failed sign-in of `client`; returns how many it made in the current window. */
  failed(client: string): number {
    const now = this.now();
    if (this.all.since + LOGIN_WINDOW_MS > now) this.all.count++;
    else this.all = { since: now, count: 1, refused: 0 };
    const f = this.failures.get(client);
    if (f && f.since + LOGIN_WINDOW_MS > now) {
      f.count++;
      return f.count;
    }
    if (this.failures.size >= MAX_CLIENTS) this.failures.delete(this.failures.keys().next().value!);
    this.failures.set(client, { since: now, count: 1 });
    return 1;
  }

  /** A good sign-in: the client's count starts over, and it passes the limit in all for a window. */
  succeeded(client: string): void {
    if (this.failures.size) this.failures.delete(client);
    this.good.delete(client);
    if (this.good.size >= MAX_CLIENTS) this.good.delete(this.good.keys().next().value!);
    this.good.set(client, this.now());
  }

  /**
   * Counts a refused attempt of a locked-out `client`: 1 for the first of its window, then 2, 3… (of all
   * clients together while the limit in all refuses it).
   */
  refused(client: string): number {
    const f = this.failures.get(client);
    if (f && f.count >= LOGIN_FAILURES_ALLOWED) {
      f.refused = (f.refused ?? 0) + 1;
      return f.refused;
    }
    if (this.all.count >= LOGIN_FAILURES_ALLOWED_IN_ALL) return ++this.all.refused;
    return 0;
  }
}

/** The client's address as logs show it (Express `req.ip`, honouring `trust proxy`; Fastify `ip`), JSON-quoted. @internal */
export function clientOf(req: any): string {
  const ip = typeof req?.ip === 'string' && req.ip ? req.ip : String(req?.socket?.remoteAddress ?? 'unknown');
  return JSON.stringify(ip.slice(0, 64));
}
