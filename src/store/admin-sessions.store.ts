import { Injectable } from '@nestjs/common';
import { DurableDatabase } from './durable-database';
import type { SqlText } from './durable-names';

/**
 * A new session (and, in the same statement, the sessions that ended over a day ago are deleted).
 * $1 token hash, $2 operator, $3 key ref, $4 salt, $5 ttl ms
 */
const CREATE_SQL: SqlText = (t) => `
with gone as (
  delete from ${t.adminSessions} where expires_at < now() - interval '1 day'
)
insert into ${t.adminSessions} (token_hash, operator, key_ref, salt, expires_at)
values ($1, $2, $3, $4, now() + $5 * interval '1 millisecond')`;

/**
 * A live session by its token's hash: not revoked, not expired, and not older than the TTL configured
 * now (a shorter TTL ends older sessions). $1 token hash, $2 ttl ms
 */
const FIND_SQL: SqlText = (t) => `
select operator, key_ref, salt from ${t.adminSessions}
 where token_hash = $1 and revoked_at is null and expires_at > now()
   and created_at > now() - $2 * interval '1 millisecond'`;

/** Ends a session (sign-out). $1 token hash */
const REVOKE_SQL: SqlText = (t) =>
  `update ${t.adminSessions} set revoked_at = now() where token_hash = $1 and revoked_at is null`;

/** A stored session: who signed in, and the salted reference to the key they used. */
export interface StoredAdminSession {
  operator: string;
  keyRef: string;
  salt: string;
}

/** The admin page's sign-in sessions, on the server (`ai_admin_sessions`). @internal */
@Injectable()
export class AdminSessionStore {
  constructor(private readonly db: DurableDatabase) {}

  async create(tokenHash: string, session: StoredAdminSession, ttlMs: number): Promise<void> {
    await this.db.query(CREATE_SQL, [tokenHash, session.operator, session.keyRef, session.salt, ttlMs]);
  }

  async find(tokenHash: string, ttlMs: number): Promise<StoredAdminSession | null> {
    const { rows } = await this.db.query(FIND_SQL, [tokenHash, ttlMs]);
    return rows[0] ? { operator: rows[0].operator, keyRef: rows[0].key_ref, salt: rows[0].salt } : null;
  }

  async revoke(tokenHash: string): Promise<void> {
    await this.db.query(REVOKE_SQL, [tokenHash]);
  }
}
