import { InvalidArgumentError } from '../errors/invalid-argument.error';
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
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    items: page.map((r) => r.item),
    next: rows.length > limit ? encodeRunCursor(last.createdKey, last.id) : undefined,
  };
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
