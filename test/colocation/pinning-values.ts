import { holdsQuery, isGroup, Item } from './sql-tree';
import type { Rel } from './sql-blocks';

/**
 * What a statement's rows are pinned to. Every table reference gets the value of its distribution
 * column as the statement fixes it: one value (`key`: a parameter such as `$1`, an expression of
 * parameters only, `new.id` in a trigger, or the default of a one-row insert), several (`many`: an
 * array parameter, a join that does not fix it), or unknown (`opaque`: a column that is not the key).
 */
export type Val = { k: 'key'; id: string } | { k: 'many'; why: string } | { k: 'opaque' };

/** One table reference of a statement: where (CTE path), read or written, and what it is pinned to. */
export interface Ref {
  table: string;
  write: boolean;
  /** `main`, or the CTE name (`slot_wake`), `>sub` for a subquery inside it. */
  path: string;
  val: Val;
  /** The condition (or insert source) that pinned it, for messages. */
  via: string;
  /** An INSERT's ON CONFLICT columns: the unique index it relies on must hold the key on a distributed table. */
  conflict?: string[];
}

/** The distribution column of each table, by table name (tables not here have none). */
export type KeyColumns = Record<string, string>;

export const OPAQUE: Val = { k: 'opaque' };
const KEYWORDS = new Set([
  'placing',
  'from',
  'for',
  'case',
  'when',
  'then',
  'else',
  'end',
  'and',
  'or',
  'not',
  'null',
  'true',
  'false',
  'is',
  'in',
  'interval',
  'as',
]);

/** Two values that are the same one run. */
export const same = (a: Val, b: Val): boolean => a.k === 'key' && b.k === 'key' && a.id === b.id;

/** A cast suffix (`::uuid[]`, `::timestamptz`) dropped. */
export function uncast(items: Item[]): Item[] {
  const i = items.findIndex((x) => x.type === 'op' && x.v.startsWith('::'));
  return i > 0 ? items.slice(0, i) : items;
}

/** An expression of parameters, literals and function calls only (no column): one value. */
export function paramsOnly(items: Item[]): boolean {
  let params = false;
  const ok = (xs: Item[]): boolean =>
    xs.every((x, i) => {
      if (isGroup(x)) return !holdsQuery(x) && ok(x.items);
      if (x.type === 'param') return (params = true);
      if (x.type !== 'word') return x.type !== '.';
      const before = xs[i - 1];
      return KEYWORDS.has(x.v) || isGroup(xs[i + 1]) || (before?.type === 'op' && before.v.startsWith('::'));
    });
  return ok(items) && params;
}

export type Cols = Map<string, Val>;
export interface RelState {
  rel: Rel;
  /** Base table: its name; undefined for a CTE, a subquery or a function. */
  table?: string;
  /** Output columns (CTE, subquery, function) or the pinned key (base table). */
  cols: Cols;
  pinned?: Val;
  via?: string;
}
export interface Scope {
  rels: RelState[];
  parent?: Scope;
}

/** The scope outside a block (a FROM subquery or an INSERT's source sees no sibling relation). */
export const outerOf = (scope: Scope): Scope => scope.parent ?? { rels: [] };
