import { holdsQuery, isGroup, isWord, Item, splitCommas, splitItems } from './sql-tree';
import type { Output } from './sql-blocks';

export const SELECT_CLAUSES = [
  'from',
  'where',
  'group',
  'having',
  'window',
  'order',
  'limit',
  'offset',
  'for',
  'fetch',
];
export const CLAUSES = [...SELECT_CLAUSES, 'returning', 'using', 'set'];
const NOT_NAMES = ['end', 'null', 'true', 'false'];
export const NOT_ALIAS = [
  'join',
  'inner',
  'left',
  'right',
  'full',
  'cross',
  'natural',
  'outer',
  'on',
  'using',
  'with',
  'lateral',
];

/** Index of each top-level clause keyword of a block, `is distinct from` and `do update set` left out. */
export function clauses(items: Item[], names = SELECT_CLAUSES): Map<string, number> {
  const at = new Map<string, number>();
  items.forEach((x, i) => {
    if (!isWord(x) || !names.includes(x.v) || at.has(x.v)) return;
    if (x.v === 'from' && isWord(items[i - 1], 'distinct')) return;
    at.set(x.v, i);
  });
  return at;
}

/** The items from clause `name` to the next clause (in `order`), or undefined. */
export function clause(items: Item[], at: Map<string, number>, name: string): Item[] | undefined {
  const start = at.get(name);
  if (start === undefined) return undefined;
  const next = [...at.values()].filter((j) => j > start).sort((a, b) => a - b)[0] ?? items.length;
  return items.slice(start + 1, next);
}

/** Top-level AND conjuncts of a condition (a parenthesised AND is flattened; BETWEEN ... AND kept). */
export function conjuncts(items: Item[] | undefined): Item[][] {
  if (!items?.length) return [];
  let between = false;
  const parts = splitItems(items, (x) => {
    if (isWord(x, 'between')) between = true;
    if (!isWord(x, 'and')) return false;
    if (between) return (between = false);
    return true;
  });
  return parts.flatMap((p) =>
    p.length === 1 && isGroup(p[0]) && !holdsQuery(p[0]) ? conjuncts(p[0].items) : [p],
  );
}

export function outputsOf(items: Item[] | undefined): Output[] {
  if (!items?.length) return [];
  return splitCommas(items).map((expr) => {
    const n = expr.length;
    if (n >= 2 && isWord(expr[n - 2], 'as'))
      return { name: (expr[n - 1] as { v: string }).v, expr: expr.slice(0, n - 2) };
    if (
      n >= 2 &&
      isWord(expr[n - 1]) &&
      !NOT_NAMES.includes((expr[n - 1] as { v: string }).v) &&
      expr[n - 2].type !== '.' &&
      expr[n - 2].type !== 'op'
    )
      return { name: (expr[n - 1] as { v: string }).v, expr: expr.slice(0, n - 1) };
    const last = expr[n - 1];
    return { name: isWord(last) ? last.v : last?.type === 'op' && last.v === '*' ? '*' : '?column?', expr };
  });
}
