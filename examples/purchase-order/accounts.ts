/**
 * Step 7, "mark the account active", writes the app's own tables, not a vendor's: one row in
 * `account_activations` per activation (an insert, not an upsert, so an activation repeated for one
 * order shows up as a second row) and the buyer's row in `accounts` (`active`, and a counter of
 * activations). The durable side runs it as a `@DurableTransaction` in the module's database
 * (purchase-order.agent.ts); the naive side sends the same statements to its own tables, one plain
 * write after the other (naive/naive-purchase-order.ts). The demo counts the rows per order.
 */
import { Client } from 'pg';

/** The two tables of one side. */
export interface AccountTables {
  accounts: string;
  activations: string;
}

/** The durable side's tables, in the module's database (an app's own tables beside `ai_runs`). */
export const DURABLE_ACCOUNTS: AccountTables = { accounts: 'accounts', activations: 'account_activations' };
/** The naive side's tables, the same shape (in the same demo database, so nothing is shared but the server). */
export const NAIVE_ACCOUNTS: AccountTables = {
  accounts: 'naive_accounts',
  activations: 'naive_account_activations',
};

/** What a client, a pool or a durable transaction's client answers to. */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: any[] }>;
}

export interface Activation {
  buyerId: string;
  active: true;
  /** The buyer's activations so far, this one included. */
  activations: number;
}

/** The app's migration for one side's tables (idempotent). */
export function accountTablesSql(t: AccountTables): string {
  return `
create table if not exists ${t.accounts} (
  buyer_id text primary key,
  active boolean not null default false,
  activations int not null default 0,
  updated_at timestamptz not null default now()
);
create table if not exists ${t.activations} (
  id bigserial primary key,
  order_ref text not null,
  buyer_id text not null,
  activated_at timestamptz not null default clock_timestamp()
);
create index if not exists ${t.activations}_order_ref_idx on ${t.activations} (order_ref);`;
}

/** Creates both sides' tables in the database at `url` (once, before any worker starts). */
export async function ensureAccountTables(url: string): Promise<void> {
  const c = new Client({ connectionString: url });
  c.on('error', () => undefined);
  await c.connect();
  try {
    for (const t of [DURABLE_ACCOUNTS, NAIVE_ACCOUNTS]) await c.query(accountTablesSql(t));
  } finally {
    await c.end().catch(() => undefined);
  }
}

/** The activation itself: two statements, sent on `q` (inside a transaction or not, the caller's choice). */
export async function writeActivation(
  q: Queryable,
  t: AccountTables,
  orderRef: string,
  buyerId: string,
): Promise<Activation> {
  await q.query(`insert into ${t.activations} (order_ref, buyer_id) values ($1, $2)`, [orderRef, buyerId]);
  const { rows } = await q.query(
    `insert into ${t.accounts} as a (buyer_id, active, activations) values ($1, true, 1)
     on conflict (buyer_id) do update set active = true, activations = a.activations + 1, updated_at = now()
     returning activations`,
    [buyerId],
  );
  return { buyerId, active: true, activations: Number(rows[0].activations) };
}

/** Activation rows per order reference (those starting with `refPrefix`), read from one side's table. */
export async function activationsByOrder(
  q: Queryable,
  t: AccountTables,
  refPrefix: string,
): Promise<Map<string, number>> {
  const { rows } = await q.query(
    `select order_ref, count(*)::int as n from ${t.activations} where starts_with(order_ref, $1) group by order_ref`,
    [refPrefix],
  );
  return new Map(rows.map((r) => [String(r.order_ref), Number(r.n)]));
}
