import { InvalidArgumentError } from '../errors/invalid-argument.error';
import type { RunHistoryQuery } from '../interfaces/run.interface';
import { isUuid } from './uuid';

/** What a cursor looks like before it is decoded (base64url, at most 200 characters). */
export const RUN_CURSOR_PATTERN = /^[A-Za-z0-9_-]{1,200}$/;

/** A decoded cursor: the `created_at` of the run a page ended on (microseconds, UTC) and its id. */
export type RunCursorKey = [createdKey: string, id: string];

/** A run of a newest-first list with the key a page ending on it continues after. */
export interface KeyedRun<T> {
  item: T;
  /** The run's `created_at` as the store renders it for a cursor (microseconds, UTC). */
  createdKey: string;
  id: string;
}

/** One page of a newest-first run list; `next` is undefined on the last page. */
export interface PageOfRuns<T> {
  items: T[];
  next: string | undefined;
}

const KEY = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{6})Z$/;

/**
 * Keyset paging over runs, newest first: decodes `after` (a previous page's `next`; anything else is an
 * InvalidArgumentError naming `after`), lets `fetch` read up to `limit + 1` runs before that key, and
 * returns the first `limit` with the cursor after the last of them when there were more.
 */
export async function pageOfRuns<T>(
  after: string | undefined,
  limit: number,
  fetch: (after: RunCursorKey | null, take: number) => Promise<KeyedRun<T>[]>,
): Promise<PageOfRuns<T>> {
  const rows = await fetch(after === undefined ? null : decodeRunCursor(after), limit + 1);
  const { items, next } = keysetPage(rows, limit, (last) => encodeRunCursor(last.createdKey, last.id));
  return { items: items.map((r) => r.item), next };
}

/**
 * The one keyset step: of `rows` fetched as `limit + 1`, the first `limit`, and the key after the last
 * of them (`keyOf`) when there were more.
 */
function keysetPage<T, K>(rows: T[], limit: number, keyOf: (last: T) => K): { items: T[]; next?: K } {
  const items = rows.slice(0, limit);
  return rows.length > limit ? { items, next: keyOf(items[items.length - 1]) } : { items };
}

/** The keyset cursor after a page's last run: its `createdKey` and id. */
function encodeRunCursor(createdKey: string, id: string): string {
  return Buffer.from(`${createdKey}|${id}`).toString('base64url');
}

/**
 * Decodes a cursor made by encodeRunCursor into its key, both parts checked to be values PostgreSQL
 * accepts (a real calendar instant from 1970 to 9999, a UUID); otherwise InvalidArgumentError.
 */
function decodeRunCursor(cursor: string): RunCursorKey {
  const parts = Buffer.from(String(cursor), 'base64url').toString('utf8').split('|');
  const m = parts.length === 2 ? KEY.exec(parts[0]) : null;
  if (m && isUuid(parts[1])) {
    const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number);
    const t = new Date(Date.UTC(y, mo - 1, d, h, mi, s));
    const real =
      y >= 1970 && t.getUTCFullYear() === y && t.getUTCMonth() === mo - 1 && t.getUTCDate() === d && h < 24;
    if (real && t.getUTCHours() === h && t.getUTCMinutes() === mi && t.getUTCSeconds() === s) {
      return [parts[0], parts[1]];
    }
  }
  throw new InvalidArgumentError('after', 'is not a cursor returned as `next` by a previous page');
}

/** Largest page of a run's events or checkpoints RunRepository reads at once. */
export const MAX_HISTORY_LIMIT = 1000;

/** A checked RunHistoryQuery: from `position` (exclusive; null: from the oldest or the newest), `limit` null for all. */
export interface HistoryRange {
  position: number | null;
  newestFirst: boolean;
  limit: number | null;
}

/**
 * Checks a query on a run's events (positions are event ids) or checkpoints (step indexes): `after` and
 * `before` are integers from 0 to 2^53 - 1, `after` goes with neither `before` nor `newestFirst`, and
 * `limit` is 1..MAX_HISTORY_LIMIT; otherwise InvalidArgumentError naming the field.
 */
export function requireHistoryRange(q: RunHistoryQuery = {}): HistoryRange {
  const position = (v: unknown, field: string): number | null => {
    if (v === undefined || v === null) return null;
    if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return v;
    throw new InvalidArgumentError(field, `must be an integer from 0 to 2^53 - 1, got ${String(v)}`);
  };
  const after = position(q.after, 'after');
  const before = position(q.before, 'before');
  if (q.newestFirst !== undefined && typeof q.newestFirst !== 'boolean')
    throw new InvalidArgumentError('newestFirst', 'must be a boolean');
  const newestFirst = before !== null || q.newestFirst === true;
  if (after !== null && newestFirst) {
    throw new InvalidArgumentError(before !== null ? 'before' : 'newestFirst', 'cannot be given with after');
  }
  const limit = q.limit ?? null;
  if (limit !== null && (!Number.isInteger(limit) || limit < 1 || limit > MAX_HISTORY_LIMIT)) {
    throw new InvalidArgumentError('limit', `must be an integer from 1 to ${MAX_HISTORY_LIMIT}`);
  }
  return { position: newestFirst ? before : after, newestFirst, limit };
}

/** One page of a run's events or checkpoints; `next` (the position to pass as the same `after` or `before`) is absent on the last page. */
export interface PageByPosition<T> {
  items: T[];
  next?: number;
}

/**
 * Keyset paging over a run's events or checkpoints by position (event id, step index): lets `fetch`
 * read up to `limit + 1` entries of `query` and returns the first `limit`, with the position of the
 * last of them as `next` when there were more.
 */
export async function pageByPosition<T>(
  query: Omit<RunHistoryQuery, 'limit'>,
  limit: number,
  fetch: (query: RunHistoryQuery) => Promise<T[]>,
  positionOf: (item: T) => number,
): Promise<PageByPosition<T>> {
  return keysetPage(await fetch({ ...query, limit: limit + 1 }), limit, positionOf);
}
