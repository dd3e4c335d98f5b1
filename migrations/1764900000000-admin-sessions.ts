import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * Sign-in sessions of the admin page (`DurableAdminModule` with `login: true`), kept on the server:
 * the cookie holds a random token only, the table its SHA-256 (a read of the table gives no live
 * session), the operator, a salted reference to the key that signed in (a changed key ends its
 * sessions), and when it expires or was revoked (sign-out). Every pod of an app sees every session.
 */
export class AdminSessions1764900000000 implements MigrationInterface {
  name = 'AdminSessions1764900000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`
      create table ${t.adminSessions} (
        token_hash text primary key,
        operator   text not null,
        key_ref    text not null,
        salt       text not null,
        created_at timestamptz not null default now(),
        expires_at timestamptz not null,
        revoked_at timestamptz
      )`);
    await q.query(`create index ai_admin_sessions_expiry_idx on ${t.adminSessions} (expires_at)`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`drop table ${t.adminSessions}`);
  }
}
