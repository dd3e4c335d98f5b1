import type { MigrationInterface, QueryRunner } from 'typeorm';
import { DURABLE_EXECUTION_MIGRATIONS } from '../../migrations';

/**
 * The functions and triggers the migrations leave, read from the migrations as they are: every
 * migration's `up` runs against a recorder (no database), in order, and the DDL it sends is replayed:
 * `create [or replace] function` / `drop function`, `create trigger` / `drop trigger`.
 */
export interface SchemaCode {
  /** Function name (unqualified) → its body (the text between its dollar quotes). */
  functions: Map<string, string>;
  /** Trigger name → the table it is on and the function it calls. */
  triggers: Map<string, { table: string; fn: string }>;
}

const name = (qualified: string): string => qualified.replace(/"/g, '').split('.').pop()!;

export async function schemaCode(): Promise<SchemaCode> {
  const sent: string[] = [];
  // Each query answers one empty row: a migration that reads the catalog first (`const [{ n }] = ...`) goes on.
  const recorder = { query: async (sql: string) => (sent.push(sql), [{}]) } as unknown as QueryRunner;
  for (const M of DURABLE_EXECUTION_MIGRATIONS as Array<new () => MigrationInterface>)
    await new M().up(recorder);
  const out: SchemaCode = { functions: new Map(), triggers: new Map() };
  for (const sql of sent) {
    const fn = /create\s+(?:or\s+replace\s+)?function\s+([\w."]+)\s*\(/i.exec(sql);
    if (fn) {
      const body = /(\$\w*\$)([\s\S]*?)\1/.exec(sql.slice(fn.index));
      if (!body) throw new Error(`function ${fn[1]}: no dollar-quoted body`);
      out.functions.set(name(fn[1]), body[2]);
      continue;
    }
    const dropFn = /drop\s+function\s+(?:if\s+exists\s+)?([\w."]+)/i.exec(sql);
    if (dropFn) out.functions.delete(name(dropFn[1]));
    const trg =
      /create\s+trigger\s+(\w+)[\s\S]*?\son\s+([\w."]+)[\s\S]*?execute\s+(?:function|procedure)\s+([\w."]+)/i.exec(
        sql,
      );
    if (trg) out.triggers.set(trg[1], { table: name(trg[2]), fn: name(trg[3]) });
    const dropTrg = /drop\s+trigger\s+(?:if\s+exists\s+)?(\w+)/i.exec(sql);
    if (dropTrg) out.triggers.delete(dropTrg[1]);
  }
  return out;
}
