import type { CronMetadata, DurableCronOptions } from '../interfaces/step-options.interface';
import { cronPackage, cronProblem } from './cron';
import { escapeUnsafeText, unsafeTextProblem } from './safe-text';

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

/** Ticks looked at, at most, for a schedule's shortest interval (`shortestInterval`). */
const INTERVAL_TICKS = 500;
/** How far ahead `shortestInterval` looks at most: a sparse cron's boundary ticks (Dec 31 to Jan 1). */
const INTERVAL_HORIZON_MS = 2 * 366 * 86_400_000;

/**
 * The shortest time (ms) between two consecutive ticks of `cron` (in `timezone`) among its ticks after
 * `from`, up to INTERVAL_TICKS of them or INTERVAL_HORIZON_MS ahead; it stops at the first gap below
 * `floorMs`. For a floor of a minute or less this is exact after a few ticks (only a seconds field with
 * two values or more makes gaps under a minute, and the first minute that fires shows them).
 * Infinity when the cron fires once at most in that time. @internal
 */
export function shortestInterval(cron: string, timezone: string, from: Date, floorMs: number): number {
  const time = new (cronPackage().CronTime)(cron, timezone);
  const end = from.getTime() + INTERVAL_HORIZON_MS;
  let prev = time.getNextDateFrom(from, timezone).toJSDate();
  let min = Infinity;
  for (let i = 0; i < INTERVAL_TICKS && prev.getTime() <= end; i++) {
    const next = time.getNextDateFrom(prev, timezone).toJSDate();
    min = Math.min(min, next.getTime() - prev.getTime());
    if (min < floorMs) break;
    prev = next;
  }
  return min;
}

/** A schedule's options with their defaults. @internal */
export function scheduleOf(cron: string, o: DurableCronOptions = {}): CronMetadata {
  return {
    cron,
    name: o.name,
    timezone: o.timezone ?? 'UTC',
    input: o.input ?? {},
    catchUp: o.catchUp ?? 'latest',
    overlap: o.overlap ?? 'allow',
    concurrencyKey: o.concurrencyKey,
  };
}

/** Why an optional name or key is not an identifier (at most 200 characters, the rule of util/safe-text). */
function identifierProblem(v: unknown): string | null {
  if (v === undefined) return null;
  if (typeof v !== 'string' || !v || v.length > 200)
    return `must be a non-empty string of at most 200 characters, got ${typeof v === 'string' ? `${v.length} characters` : typeof v}`;
  return unsafeTextProblem(v);
}

/** What is wrong with a schedule, naming the field; undefined when nothing. @internal */
export function scheduleProblem(m: CronMetadata): { field: string; reason: string } | undefined {
  if (typeof m.cron === 'string' && m.cron.length > 200)
    return { field: 'cron', reason: `must be at most 200 characters, got ${m.cron.length}` };
  const cron = cronProblem(m.cron);
  if (cron) return { field: 'cron', reason: cron };
  try {
    new (cronPackage().CronTime)(m.cron, m.timezone);
  } catch {
    return {
      field: 'timezone',
      reason: `must be an IANA time zone such as 'Europe/Berlin', got ${escapeUnsafeText(JSON.stringify(m.timezone) ?? typeof m.timezone)}`,
    };
  }
  const name = identifierProblem(m.name);
  if (name) return { field: 'name', reason: name };
  if (!['latest', 'all', 'skip'].includes(m.catchUp))
    return {
      field: 'catchUp',
      reason: `must be 'latest', 'all' or 'skip', got ${JSON.stringify(m.catchUp)}`,
    };
  if (!['allow', 'skip', 'queue'].includes(m.overlap))
    return {
      field: 'overlap',
      reason: `must be 'allow', 'skip' or 'queue', got ${JSON.stringify(m.overlap)}`,
    };
  const key = identifierProblem(m.concurrencyKey);
  if (key) return { field: 'concurrencyKey', reason: key };
  if (typeof m.input !== 'object' || m.input === null || Array.isArray(m.input))
    return { field: 'input', reason: 'must be a JSON object (the run also gets schedule and scheduledAt)' };
  return undefined;
}
