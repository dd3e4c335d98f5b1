import { Client } from 'pg';
import type { Catalog, Table } from './catalog';

/**
 * The expand-only rule on the catalog (docs/UPGRADING.md, "The compatibility rule"): what the previous
 * release's workers write must still be accepted. For each table of the previous release, read after
 * every migration since: no table or column of it dropped, renamed or retyped; no column of it made NOT
 * NULL or left NOT NULL without its default; a new column NOT NULL only with a default; a new CHECK,
 * foreign key, unique index or trigger only where the row an old writer makes cannot meet it. That is
 * decided, not assumed: the new columns of such a row hold their defaults (or NULL), so a CHECK on new
 * columns only is evaluated on them, and a unique index or trigger condition is harmless when one of its
 * AND-ed terms that names new columns only is false there (or a key column is a new column left NULL).
 */
export async function catalogProblems(c: Client, before: Catalog, after: Catalog): Promise<string[]> {
  const problems: string[] = [];
  for (const [name, old] of Object.entries(before)) {
    const now = after[name];
    if (!now) {
      problems.push(`table ${name} was dropped or renamed (the previous release uses it)`);
      continue;
    }
    problems.push(...columnProblems(name, old, now));
    const added = (c: string) => !old.columns[c];
    const oldRow = oldRowOf(now, added);
    for (const [k, con] of Object.entries(now.constraints)) {
      const had = old.constraints[k];
      if (had && had.def === con.def) continue;
      const what = `${name}: ${had ? 'changed' : 'new'} constraint ${k} (${con.def})`;
      if (con.type === 'p' || con.type === 'u') continue; // its index is checked below
      if (con.type === 'c' && con.columns.every(added)) {
        const expr = con.def.replace(/^CHECK /, '').replace(/ NOT VALID$/, '');
        if ((await evaluate(c, oldRow, expr)) !== false) continue;
        problems.push(`${what} fails on the row a previous-release writer inserts`);
      } else if (con.type === 'f' && con.columns.every((col) => added(col) && nullable(now, col))) continue;
      else problems.push(`${what} constrains what the previous release writes`);
    }
    for (const [k, ix] of Object.entries(now.indexes)) {
      const had = old.indexes[k];
      if (!ix.unique || (had?.unique && had.def.replace(/ ON \S+ /, ' ') === ix.def.replace(/ ON \S+ /, ' ')))
        continue;
      const weaker = Object.values(old.indexes).some(
        (o) => o.unique && !o.predicate && o.columns.every((col) => ix.columns.includes(col)),
      );
      const nullKey = !ix.nullsNotDistinct && ix.columns.some((col) => added(col) && nullable(now, col));
      if (weaker || nullKey || (await someTermFalse(c, oldRow, ix.predicate, added))) continue;
      problems.push(`${name}: new unique index ${k} (${ix.def}) may refuse what the previous release writes`);
    }
    for (const [k, tg] of Object.entries(now.triggers)) {
      if (old.triggers[k]?.def === tg.def) continue;
      const updateOfNew = tg.update && tg.updateOf.length > 0 && tg.updateOf.every(added);
      const onlyUpdateOfNew = updateOfNew && !tg.insert && !tg.delete && !tg.truncate;
      const when = tg.when?.replace(/\b(new|old)\./gi, '');
      if (onlyUpdateOfNew || (await someTermFalse(c, oldRow, when ?? null, added))) continue;
      problems.push(`${name}: new trigger ${k} fires on what the previous release writes (${tg.def})`);
    }
  }
  return problems;
}

function nullable(t: Table, col: string): boolean {
  return !t.columns[col].notNull && t.columns[col].default === null;
}

function columnProblems(name: string, old: Table, now: Table): string[] {
  const problems: string[] = [];
  for (const [col, was] of Object.entries(old.columns)) {
    const is = now.columns[col];
    if (!is) problems.push(`${name}.${col} was dropped or renamed (the previous release uses it)`);
    else if (is.type !== was.type) problems.push(`${name}.${col} changed type ${was.type} -> ${is.type}`);
    else if (is.notNull && !was.notNull) problems.push(`${name}.${col} became NOT NULL`);
    else if (is.notNull && was.default !== null && is.default === null)
      problems.push(`${name}.${col} is NOT NULL and lost its default ${was.default}`);
  }
  for (const [col, is] of Object.entries(now.columns))
    if (!old.columns[col] && is.notNull && is.default === null)
      problems.push(`${name}.${col} is new, NOT NULL and has no default: previous-release inserts fail`);
  return problems;
}

/**
 * A previous-release writer's row, as SQL per column: the new columns at their defaults, the others
 * unknown (null).
 */
function oldRowOf(t: Table, added: (c: string) => boolean): Record<string, string> {
  return Object.fromEntries(
    Object.entries(t.columns).map(([col, c]) => {
      const value =
        added(col) && c.default && !['identity', 'generated'].includes(c.default) ? c.default : 'null';
      return [col, `(${value})::${c.type}`];
    }),
  );
}

/** The value of a boolean SQL expression over the table's columns, on `row`. */
async function evaluate(c: Client, row: Record<string, string>, expr: string): Promise<boolean | null> {
  const cols = Object.entries(row)
    .map(([col, v]) => `${v} as "${col}"`)
    .join(', ');
  const { rows } = await c.query(`select (${expr}) as v from (select ${cols}) s`);
  return rows[0].v;
}

/**
 * Whether `expr` (a partial index's predicate, a trigger's WHEN) is false on every row a previous-release
 * writer makes: one of its top-level AND terms names only new columns and is false on their defaults.
 */
async function someTermFalse(
  c: Client,
  row: Record<string, string>,
  expr: string | null,
  added: (c: string) => boolean,
): Promise<boolean> {
  if (!expr) return false;
  for (const term of topLevelAnd(expr)) {
    const words = term.replace(/'(?:[^']|'')*'/g, "''").match(/[a-z_][a-z0-9_]*/gi) ?? [];
    const named = words.filter((w) => w in row);
    if (!named.length || !named.every(added)) continue;
    if ((await evaluate(c, row, term)) === false) return true;
  }
  return false;
}

/** The terms of `a AND b AND c` at the top level of parentheses (one term when there is no AND). */
function topLevelAnd(expr: string): string[] {
  let s = expr.trim();
  while (s.startsWith('(') && closing(s, 0) === s.length - 1) s = s.slice(1, -1).trim();
  const terms: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    if (s[i] === "'") i = s.indexOf("'", i + 1);
    else if (s[i] === '(') depth++;
    else if (s[i] === ')') depth--;
    else if (depth === 0 && /^ AND /i.test(s.slice(i, i + 5))) {
      terms.push(s.slice(start, i));
      start = i + 5;
    }
  }
  terms.push(s.slice(start));
  return terms.map((t) => t.trim());
}

function closing(s: string, open: number): number {
  let depth = 0;
  for (let i = open; i < s.length; i++) {
    if (s[i] === "'") i = s.indexOf("'", i + 1);
    else if (s[i] === '(') depth++;
    else if (s[i] === ')' && --depth === 0) return i;
  }
  return -1;
}
