import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { isUuid } from './uuid';

/** SQL that renders a run's `created_at` as the cursor's timestamp part (microseconds, UTC). */
export const CURSOR_KEY_SQL = `to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

const KEY = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{6})Z$/;

/** The keyset cursor after a page's last run: its `created_key` (see CURSOR_KEY_SQL) and id. */
export function encodeRunCursor(createdKey: string, id: string): string {
  return Buffer.from(`${createdKey}|${id}`).toString('base64url');
}

/**
 * Decodes a cursor made by encodeRunCursor into `[timestamp, id]`, both checked to be values
 * PostgreSQL accepts (a real calendar instant from 1970 to 9999, a UUID); otherwise
 * InvalidArgumentError naming `field`.
 */
export function decodeRunCursor(cursor: string, field = 'after'): [string, string] {
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
  throw new InvalidArgumentError(field, 'is not a cursor returned as `next` by a previous page');
}
