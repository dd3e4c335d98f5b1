import { Client } from 'pg';

/** What PostgreSQL says of a statement's text when a driver prepares it (Parse, then Describe). */
export type Described =
  { ok: true; columns: { name: string; type: string }[] } | { ok: false; code: string; message: string };

/**
 * Parse and Describe one statement on `client`'s connection, as node-postgres sends a query with
 * parameters (their types left for the server to infer), without executing it: the unnamed statement,
 * so nothing is left prepared. The result columns come with their types' names. (A Submittable: pg
 * has no call that describes without executing.)
 */
export async function describeStatement(client: Client, text: string): Promise<Described> {
  const raw = await new Promise<{ fields?: { name: string; dataTypeID: number }[]; error?: any }>(
    (resolve) => {
      const state: { fields?: { name: string; dataTypeID: number }[]; error?: any } = {};
      const submittable = {
        submit(con: any) {
          con.parse({ name: '', text, types: [] });
          con.describe({ type: 'S', name: '' });
          con.sync();
        },
        handleRowDescription(msg: { fields: { name: string; dataTypeID: number }[] }) {
          state.fields = msg.fields;
        },
        // pg drops the query at an error (the ReadyForQuery after our Sync then only frees the client).
        handleError(err: unknown) {
          state.error = err;
          resolve(state);
        },
        handleReadyForQuery() {
          resolve(state);
        },
        handleDataRow() {},
        handleCommandComplete() {},
        handleEmptyQuery() {},
        handlePortalSuspended() {},
      };
      void client.query(submittable as any);
    },
  );
  if (raw.error) return { ok: false, code: raw.error.code ?? '?', message: raw.error.message };
  const columns: { name: string; type: string }[] = [];
  for (const f of raw.fields ?? [])
    columns.push({ name: f.name, type: await typeName(client, f.dataTypeID) });
  return { ok: true, columns };
}

/** Type names by oid, per connection (a table's row type has another oid in each database). */
const typeNames = new WeakMap<Client, Map<number, string>>();

async function typeName(client: Client, oid: number): Promise<string> {
  const names = typeNames.get(client) ?? new Map<number, string>();
  typeNames.set(client, names);
  if (!names.has(oid)) {
    const { rows } = await client.query('select format_type($1::oid, null) as t', [oid]);
    names.set(oid, rows[0].t);
  }
  return names.get(oid)!;
}
