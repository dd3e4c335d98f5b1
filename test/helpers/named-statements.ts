import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Client, Pool } from 'pg';

const SRC = path.resolve(__dirname, '../../src');

/**
 * The names of the prepared statements the library sends (`'dx_claim'`, ...), read from the code: every
 * `'dx_…'` string literal in src (spec files left out). A statement added to src with a name is in this
 * set, so a test that must run every named statement fails until it runs the new one too.
 */
export function namedStatementsInSrc(dir = SRC): Set<string> {
  const names = new Set<string>();
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) {
      for (const n of namedStatementsInSrc(full)) names.add(n);
    } else if (e.name.endsWith('.ts') && !e.name.endsWith('.spec.ts')) {
      for (const m of readFileSync(full, 'utf8').matchAll(/'(dx_[a-z0-9_]+)'/g)) names.add(m[1]);
    }
  }
  return names;
}

/** One execution of a named statement, as a connection of this process sent it. */
export interface NamedCall {
  name: string;
  /** The backend's pid: which connection ran it. */
  pid: number;
  /** Its result columns as the server described them (`name:type oid`), or null when it failed. */
  columns: string | null;
  /** The error's SQLSTATE and message, when it failed. */
  error: string | null;
}

/**
 * Records every named statement (`dx_…`) any pg Client of this process runs (the pool's `query` and a
 * durable transaction's `client.query` alike), with its connection, its result's row description and its
 * error, including errors the engine swallows. `stop()` restores pg's Client.
 */
export function recordNamedCalls(): { calls: NamedCall[]; stop(): void } {
  const calls: NamedCall[] = [];
  const proto = Client.prototype as unknown as { query: (...a: unknown[]) => unknown };
  const original = proto.query;
  proto.query = function (this: Client & { processID: number }, config: unknown, ...rest: unknown[]) {
    const name = (config as { name?: unknown } | null)?.name;
    if (typeof name !== 'string' || !name.startsWith('dx_')) return original.call(this, config, ...rest);
    const pid = this.processID;
    const note = (err: any, res?: { fields?: Array<{ name: string; dataTypeID: number }> }) =>
      calls.push({
        name,
        pid,
        columns: err ? null : (res?.fields ?? []).map((f) => `${f.name}:${f.dataTypeID}`).join(', '),
        error: err ? `${err.code ?? '?'}: ${err.message}` : null,
      });
    const cbAt = rest.findIndex((a) => typeof a === 'function');
    if (cbAt >= 0) {
      const cb = rest[cbAt] as (err: unknown, res: unknown) => void;
      rest[cbAt] = (err: any, res: any) => {
        note(err, res);
        cb(err, res);
      };
      return original.call(this, config, ...rest);
    }
    return (original.call(this, config, ...rest) as Promise<any>).then(
      (res) => (note(null, res), res),
      (err) => {
        note(err);
        throw err;
      },
    );
  };
  return { calls, stop: () => void (proto.query = original) };
}

/** The statements prepared on each connection of `pool` (all its connections, taken while idle). */
export async function preparedOnPool(pool: Pool): Promise<Map<number, string[]>> {
  const clients = await Promise.all(Array.from({ length: pool.totalCount }, () => pool.connect()));
  try {
    const out = new Map<number, string[]>();
    for (const c of clients) {
      const { rows } = await c.query(`select name from pg_prepared_statements order by name`);
      out.set(
        (c as unknown as { processID: number }).processID,
        rows.map((r) => r.name),
      );
    }
    return out;
  } finally {
    for (const c of clients) c.release();
  }
}

/** A prepared statement as `pg_prepared_statements` shows it: its name, text and parameter count. */
export interface PreparedText {
  name: string;
  statement: string;
  params: number;
}

/** The named statements prepared on `pool`'s connections, with their texts (one per name). */
export async function preparedTexts(pool: Pool): Promise<PreparedText[]> {
  const { rows } = await pool.query(
    `select name, statement, cardinality(parameter_types)::int as params
       from pg_prepared_statements where name like 'dx\\_%' order by name`,
  );
  return rows;
}

/**
 * Prepares each statement on a connection of its own (as the process did), then calls `change` (a
 * migration) and replans each one (`explain execute`, which runs nothing): the errors, by name. A
 * statement whose result depends on a table's column list fails here with 0A000 "cached plan must not
 * change result type", as it would in a process that prepared it before the migration.
 */
export async function replanAfter(
  url: string,
  statements: PreparedText[],
  change: () => Promise<void>,
): Promise<string[]> {
  const probe = new Client({ connectionString: url });
  await probe.connect();
  try {
    for (const s of statements) await probe.query(`prepare ${s.name} as ${s.statement}`);
    await change();
    const errors: string[] = [];
    for (const s of statements) {
      const args = Array.from({ length: s.params }, () => 'null').join(', ');
      await probe
        .query(`explain execute ${s.name}${s.params ? `(${args})` : ''}`)
        .catch((err: any) => errors.push(`${s.name}: ${err.code}: ${err.message}`));
    }
    return errors;
  } finally {
    await probe.end();
  }
}
