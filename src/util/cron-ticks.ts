import { cronPackage } from './cron';

/** How far past its tick a `catchUp: 'skip'` schedule still fires it. */
export const SKIP_GRACE_MS = 60_000;
/** The most runs one `catchUp: 'all'` firing starts (the oldest missed ticks beyond it are dropped). */
export const MAX_CATCH_UP = 100;
/** Ticks walked at most in one firing (a per-second schedule down for a day): beyond, the latest only. */
const MAX_WALK = 200_000;

/** The first tick of `cron` (in `timezone`) strictly after `after`. @internal */
export function nextTick(cron: string, timezone: string, after: Date): Date {
  return new (cronPackage().CronTime)(cron, timezone).getNextDateFrom(after, timezone).toJSDate();
}

/**
 * The ticks of a schedule due by `now`, from `nextAt` (the first tick it has not fired) on, chosen by its
 * catch-up policy, and its next tick after `now`. @internal
 */
export function dueTicks(
  cron: string,
  timezone: string,
  nextAt: Date,
  now: Date,
  catchUp: 'latest' | 'all' | 'skip',
): { fire: Date[]; next: Date } {
  const time = new (cronPackage().CronTime)(cron, timezone);
  const missed: Date[] = [];
  let t = nextAt;
  for (let i = 0; t <= now && i < MAX_WALK; i++) {
    missed.push(t);
    if (missed.length > MAX_CATCH_UP) missed.shift();
    t = time.getNextDateFrom(t, timezone).toJSDate();
  }
  if (t <= now) t = time.getNextDateFrom(now, timezone).toJSDate(); // walked too far: resume from now
  const latest = missed.slice(-1);
  const fire =
    catchUp === 'all'
      ? missed
      : catchUp === 'latest'
        ? latest
        : latest.filter((x) => now.getTime() - x.getTime() <= SKIP_GRACE_MS);
  return { fire, next: t };
}
