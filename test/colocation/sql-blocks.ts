import { Group, holdsQuery, isGroup, isWord, Item, show, splitCommas, splitItems } from './sql-tree';
import { clause, clauses, CLAUSES, conjuncts, NOT_ALIAS, outputsOf } from './sql-clauses';

export { conjuncts };

/**
 * A statement as query blocks: its CTEs (in order) and its body (the branches of a UNION, or one
 * block). Each block keeps its FROM items as relations, its WHERE and JOIN ... ON conditions as
 * conjuncts, its output (select list or RETURNING) and every other expression (to find subqueries).
 */
export interface Stmt {
  ctes: Array<{ name: string; stmt: Stmt }>;
  parts: Block[];
}

/** A FROM item (or the target of an INSERT, UPDATE or DELETE). */
export interface Rel {
  alias: string;
  kind: 'table' | 'sub' | 'func';
  /** The table (or CTE) name of a `table` relation. */
  name?: string;
  sub?: Stmt;
  /** A function's name and arguments (`unnest($2::uuid[])`). */
  func?: { name: string; args: Item[] };
  /** Column aliases: `as c(step_index int, ...)` gives step_index. */
  cols?: string[];
  lateral?: boolean;
}

export interface Output {
  name: string;
  expr: Item[];
}

export interface Block {
  kind: 'select' | 'insert' | 'update' | 'delete' | 'values';
  rels: Rel[];
  /** The written relation of an INSERT, UPDATE or DELETE. */
  target?: Rel;
  conds: Item[][];
  outputs: Output[];
  /** Other expressions: SET, GROUP BY, ORDER BY, ON CONFLICT ... (scanned for subqueries). */
  exprs: Item[][];
  /** INSERT: its column list and its source (a query, or VALUES rows). */
  insertCols?: string[];
  source?: Stmt;
  rows?: Item[][][];
  /** SELECT ... FOR UPDATE / SHARE. */
  locks?: boolean;
  /** INSERT ... ON CONFLICT (columns): the unique index it relies on. */
  conflict?: string[];
}

/** Reads a statement (the items of one level of the tree). */
export function readStmt(items: Item[]): Stmt {
  const ctes: Stmt['ctes'] = [];
  let i = 0;
  if (isWord(items[0], 'with')) {
    i = isWord(items[1], 'recursive') ? 2 : 1;
    for (;;) {
      const name = items[i];
      if (!isWord(name)) throw new Error(`CTE name expected: ${show(items.slice(i, i + 3))}`);
      i++;
      if (isGroup(items[i])) i++; // a column list
      if (!isWord(items[i++], 'as')) throw new Error(`AS expected after CTE ${name.v}`);
      while (isWord(items[i], 'not', 'materialized')) i++;
      const body = items[i++];
      if (!isGroup(body)) throw new Error(`CTE ${name.v}: no body`);
      ctes.push({ name: name.v, stmt: readStmt(body.items) });
      if (items[i]?.type !== ',') break;
      i++;
    }
  }
  const rest = items.slice(i);
  const branches = splitItems(rest, (x) => isWord(x, 'union', 'intersect', 'except'));
  const parts = branches.flatMap((b) => {
    const body = isWord(b[0], 'all', 'distinct') ? b.slice(1) : b;
    if (body.length === 1 && isGroup(body[0])) return readStmt(body[0].items).parts;
    return [readBlock(body)];
  });
  return { ctes, parts };
}

/** One FROM item (with its joins, whose ON conditions go to `conds`). */
function readFromItem(items: Item[], rels: Rel[], conds: Item[][]): void {
  let i = 0;
  const one = (): void => {
    const lateral = isWord(items[i], 'lateral');
    if (lateral) i++;
    const x = items[i++];
    let rel: Rel;
    if (isGroup(x) && holdsQuery(x)) rel = { alias: '', kind: 'sub', sub: readStmt(x.items), lateral };
    else if (isGroup(x)) return readFromItem(x.items, rels, conds);
    else if (isWord(x) && isGroup(items[i])) {
      rel = { alias: x.v, kind: 'func', func: { name: x.v, args: (items[i++] as Group).items }, lateral };
      if (isWord(items[i], 'with') && isWord(items[i + 1], 'ordinality')) i += 2;
    } else if (isWord(x)) {
      let name = x.v;
      while (items[i]?.type === '.' && isWord(items[i + 1])) name = (items[(i += 2) - 1] as { v: string }).v;
      rel = { alias: name, kind: 'table', name };
    } else throw new Error(`FROM item expected: ${show(items.slice(i - 1))}`);
    if (isWord(items[i], 'as')) i++;
    const alias = items[i];
    if (isWord(alias) && !NOT_ALIAS.includes(alias.v)) {
      rel.alias = alias.v;
      i++;
      if (isGroup(items[i]))
        rel.cols = splitCommas((items[i++] as Group).items).map((c) => (c[0] as { v: string }).v);
    }
    rels.push(rel);
  };
  one();
  while (i < items.length) {
    while (isWord(items[i], 'natural', 'inner', 'left', 'right', 'full', 'cross', 'outer')) i++;
    if (!isWord(items[i++], 'join')) throw new Error(`JOIN expected: ${show(items.slice(i - 1))}`);
    one();
    if (isWord(items[i], 'on')) {
      const end = items.findIndex(
        (x, j) => j > i && isWord(x, 'join', 'left', 'right', 'inner', 'cross', 'full', 'natural'),
      );
      conds.push(...conjuncts(items.slice(i + 1, end < 0 ? items.length : end)));
      i = end < 0 ? items.length : end;
    } else if (isWord(items[i], 'using')) i += 2;
  }
}

function readFrom(items: Item[] | undefined, rels: Rel[], conds: Item[][]): void {
  if (items) for (const part of splitCommas(items)) readFromItem(part, rels, conds);
}

/** The table (and alias) an INSERT, UPDATE or DELETE writes, from `items[i]` on; the index after it. */
function readTarget(items: Item[], i: number): [Rel, number] {
  const rels: Rel[] = [];
  let end = i + 1;
  while (items[end]?.type === '.') end += 2;
  if (isWord(items[end], 'as')) end++;
  if (
    isWord(items[end]) &&
    !CLAUSES.includes((items[end] as { v: string }).v) &&
    !isWord(items[end], 'select', 'values', 'default')
  )
    end++;
  readFromItem(items.slice(i, end), rels, []);
  return [rels[0], end];
}

function readBlock(items: Item[]): Block {
  const head = items[0];
  const block: Block = { kind: 'select', rels: [], conds: [], outputs: [], exprs: [] };
  if (isWord(head, 'select')) {
    const at = clauses(items);
    const end = [...at.values()].sort((a, b) => a - b)[0] ?? items.length;
    let start = 1;
    if (isWord(items[1], 'distinct')) start = isWord(items[2], 'on') ? 4 : 2;
    block.outputs = outputsOf(items.slice(start, end));
    readFrom(clause(items, at, 'from'), block.rels, block.conds);
    block.conds.push(...conjuncts(clause(items, at, 'where')));
    for (const c of ['group', 'having', 'order', 'limit', 'offset'])
      block.exprs.push(clause(items, at, c) ?? []);
    block.locks = at.has('for');
  } else if (isWord(head, 'values')) {
    block.kind = 'values';
    block.rows = splitCommas(items.slice(1)).map((r) => splitCommas((r[0] as Group).items));
  } else if (isWord(head, 'insert')) {
    block.kind = 'insert';
    let i: number;
    [block.target, i] = readTarget(items, 2);
    if (isGroup(items[i]))
      block.insertCols = splitCommas((items[i++] as Group).items).map((c) => (c[0] as { v: string }).v);
    const stop = items.findIndex(
      (x, j) => j >= i && (isWord(x, 'returning') || (isWord(x, 'on') && isWord(items[j + 1], 'conflict'))),
    );
    const src = items.slice(i, stop < 0 ? items.length : stop);
    if (isWord(src[0], 'values'))
      block.rows = splitCommas(src.slice(1)).map((r) => splitCommas((r[0] as Group).items));
    else block.source = readStmt(src);
    const ret = items.findIndex((x, j) => j >= i && isWord(x, 'returning'));
    if (stop >= 0) block.exprs.push(items.slice(stop, ret < 0 ? items.length : ret));
    const target = items[stop + 2];
    if (isWord(items[stop], 'on') && isGroup(target))
      block.conflict = splitCommas(target.items).map((c) => (c[0] as { v: string }).v);
    if (ret >= 0) block.outputs = outputsOf(items.slice(ret + 1));
  } else if (isWord(head, 'update', 'delete')) {
    block.kind = head.v as 'update' | 'delete';
    let i: number;
    [block.target, i] = readTarget(items, head.v === 'delete' ? 2 : 1);
    const rest = items.slice(i);
    const at = clauses(
      rest,
      head.v === 'delete' ? ['using', 'where', 'returning'] : ['set', 'from', 'where', 'returning'],
    );
    block.exprs.push(clause(rest, at, 'set') ?? []);
    readFrom(clause(rest, at, head.v === 'delete' ? 'using' : 'from'), block.rels, block.conds);
    block.conds.push(...conjuncts(clause(rest, at, 'where')));
    block.outputs = outputsOf(clause(rest, at, 'returning'));
  } else throw new Error(`statement expected: ${show(items.slice(0, 6))}`);
  return block;
}
