import { Block, readStmt, Rel, Stmt } from './sql-blocks';
import { Group, holdsQuery, isGroup, isWord, Item, parseTree, show, Tok } from './sql-tree';
import {
  Cols,
  KeyColumns,
  OPAQUE,
  outerOf,
  paramsOnly,
  Ref,
  RelState,
  same,
  Scope,
  uncast,
  Val,
} from './pinning-values';

/**
 * Every table reference of `sql`, each with what its distribution key is pinned to (pinning-values.ts),
 * by following the statement: CTE outputs, joins, `IN (subquery)`, correlated subqueries, INSERT sources.
 * `outer`: values visible as `alias.col` (a trigger's `new`).
 */
export function analyze(
  sql: string,
  keys: KeyColumns,
  outer: Record<string, Record<string, Val>> = {},
): Ref[] {
  const refs: Ref[] = [];
  const top: Scope = {
    rels: Object.entries(outer).map(([alias, cols]) => ({
      rel: { alias, kind: 'func' },
      cols: new Map(Object.entries(cols)),
    })),
  };
  const ctx = new Analysis(keys, refs);
  ctx.stmt(readStmt(parseTree(sql)), top, new Map(), 'main');
  return refs;
}

class Analysis {
  constructor(
    private readonly keys: KeyColumns,
    private readonly refs: Ref[],
  ) {}

  /** Above 0 while values are only being computed: subqueries met then record no reference. */
  private dry = 0;

  private quiet<T>(f: () => T): T {
    this.dry++;
    try {
      return f();
    } finally {
      this.dry--;
    }
  }

  /** Analyses a statement; its output columns (names from the first branch, values merged by position). */
  stmt(s: Stmt, parent: Scope, ctes: Map<string, Cols>, path: string): Cols {
    const scoped = new Map(ctes);
    for (const c of s.ctes) {
      scoped.set(c.name, new Map()); // a recursive CTE reads itself: its columns unknown inside
      scoped.set(c.name, this.stmt(c.stmt, parent, scoped, c.name));
    }
    const outs = s.parts.map((b) => this.block(b, parent, scoped, path));
    if (outs.length === 1) return outs[0];
    const names = [...outs[0].keys()];
    const merged: Cols = new Map();
    names.forEach((n, i) => {
      const vals = outs.map((o) => [...o.values()][i] ?? OPAQUE);
      merged.set(
        n,
        vals.every((v) => same(v, vals[0])) ? vals[0] : { k: 'many', why: `branches of ${path} differ` },
      );
    });
    return merged;
  }

  private relState(r: Rel, scope: Scope, ctes: Map<string, Cols>, path: string): RelState {
    if (r.kind === 'table' && ctes.has(r.name!)) return { rel: r, cols: ctes.get(r.name!)! };
    if (r.kind === 'table') return { rel: r, table: r.name!, cols: new Map() };
    if (r.kind === 'sub')
      return { rel: r, cols: this.stmt(r.sub!, r.lateral ? scope : outerOf(scope), ctes, `${path}>sub`) };
    this.scan(r.func!.args, scope, ctes, path);
    const many: Val = { k: 'many', why: `rows of ${r.func!.name}()` };
    return { rel: r, cols: new Map((r.cols ?? [r.alias]).map((c) => [c, many])) };
  }

  private block(b: Block, parent: Scope, ctes: Map<string, Cols>, path: string): Cols {
    const scope: Scope = { rels: [], parent };
    for (const r of b.rels) scope.rels.push(this.relState(r, scope, ctes, path));
    let target: RelState | undefined;
    if (b.target) scope.rels.push((target = this.relState(b.target, scope, ctes, path)));
    if (b.kind === 'insert') this.pinInsert(b, target!, scope, ctes, path);
    this.pin(b, scope, ctes, path);
    for (const s of scope.rels.filter((s) => s.table !== undefined)) {
      const key = this.keys[s.table!];
      const val = s.pinned ?? {
        k: 'many',
        why: key ? `no condition fixes ${s.rel.alias}.${key}` : 'not distributed',
      };
      if (!this.dry)
        this.refs.push({
          table: s.table!,
          write: s === target || !!b.locks,
          path,
          val,
          via: s.via ?? '',
          ...(s === target && b.conflict ? { conflict: b.conflict } : {}),
        });
      if (key) s.cols.set(key, val);
    }
    for (const e of [...b.conds, ...b.exprs, ...(b.rows ?? []).flat()]) this.scan(e, scope, ctes, path);
    const out: Cols = new Map();
    for (const o of b.outputs) {
      this.scan(o.expr, scope, ctes, path);
      const star = o.expr[o.expr.length - 1];
      if (star?.type === 'op' && star.v === '*' && o.expr.length <= 3) {
        const q = o.expr.length === 3 ? (o.expr[0] as Tok).v : undefined;
        for (const s of scope.rels.filter((s) => !q || s.rel.alias === q))
          s.cols.forEach((v, n) => out.set(n, v));
      } else out.set(o.name, this.value(o.expr, scope, ctes, path));
    }
    if (b.kind === 'values')
      (b.rows?.[0] ?? []).forEach((e, i) => out.set(`column${i + 1}`, this.value(e, scope, ctes, path)));
    return out;
  }

  /** The inserted key: from the VALUES rows, the source's output at its position, or a one-row default. */
  private pinInsert(b: Block, target: RelState, scope: Scope, ctes: Map<string, Cols>, path: string): void {
    const key = this.keys[target.table ?? ''];
    if (!key) return;
    const at = b.insertCols?.indexOf(key) ?? -1;
    let val: Val;
    if (b.rows) {
      const vals = b.rows.map((r) =>
        at < 0 ? { k: 'key' as const, id: `new:${path}` } : this.value(r[at], scope, ctes, path),
      );
      val =
        vals.length === 1 || vals.every((v) => same(v, vals[0]))
          ? vals[0]
          : { k: 'many', why: 'several rows' };
    } else {
      const out = this.stmt(b.source!, outerOf(scope), ctes, path);
      val =
        at < 0
          ? { k: 'many', why: 'a key default for each row of a query' }
          : ([...out.values()][at] ?? OPAQUE);
    }
    target.pinned = val;
    target.via = `insert of ${key}`;
  }

  /** Pins base tables through equalities of their key, until nothing changes (joins pin in a chain). */
  private pin(b: Block, scope: Scope, ctes: Map<string, Cols>, path: string): void {
    this.quiet(() => {
      for (let changed = true; changed;) {
        changed = false;
        for (const s of scope.rels) {
          const key = this.keys[s.table ?? ''];
          if (!key || s.pinned?.k === 'key') continue;
          for (const c of b.conds) {
            const v = this.pinBy(c, s, key, scope, ctes, path);
            if (v && v.k !== 'opaque' && !(s.pinned && s.pinned.k === v.k)) {
              [s.pinned, s.via, changed] = [v, show(c), true];
              if (v.k === 'key') break;
            }
          }
        }
      }
    });
  }

  /** What condition `c` fixes `s.key` to, if it is `s.key = x`, `x = s.key`, `s.key in (query)` or `= any(..)`. */
  private pinBy(
    c: Item[],
    s: RelState,
    key: string,
    scope: Scope,
    ctes: Map<string, Cols>,
    path: string,
  ): Val | undefined {
    const isKey = (side: Item[]): boolean => {
      const e = uncast(side);
      if (e.length === 3 && e[1].type === '.') return isWord(e[0], s.rel.alias) && isWord(e[2], key);
      return e.length === 1 && isWord(e[0], key) && scope.rels.filter((r) => r.table).length === 1;
    };
    const eq = c.findIndex((x) => x.type === 'op' && x.v === '=');
    if (
      eq > 0 &&
      c.filter((x) => x.type === 'op' && x.v === '=').length === 1 &&
      !c.some((x) => isWord(x, 'or'))
    ) {
      const [l, r] = [c.slice(0, eq), c.slice(eq + 1)];
      for (const mine of [l, r]) {
        const other = mine === l ? r : l;
        if (!isKey(mine)) continue;
        if (isWord(other[0], 'any', 'all')) return { k: 'many', why: `${show(c)}` };
        return this.value(other, scope, ctes, path);
      }
    }
    const inAt = c.findIndex((x) => isWord(x, 'in'));
    const list = c[inAt + 1];
    if (inAt > 0 && isKey(c.slice(0, inAt)) && isGroup(list) && !isWord(c[inAt - 1], 'not')) {
      if (!holdsQuery(list)) return { k: 'many', why: 'an IN list' };
      return [...this.stmt(readStmt(list.items), scope, ctes, `${path}>in`).values()][0] ?? OPAQUE;
    }
    return undefined;
  }

  /** The value of an expression: a column of a relation in scope, a parameter, or parameters only. */
  value(items: Item[], scope: Scope, ctes: Map<string, Cols>, path: string): Val {
    return this.quiet(() => this.valueOf(items, scope, ctes, path));
  }

  private valueOf(items: Item[], scope: Scope, ctes: Map<string, Cols>, path: string): Val {
    const e = uncast(items);
    if (e.length === 1 && e[0].type === 'param') return { k: 'key', id: e[0].v };
    if (e.length === 1 && isGroup(e[0]) && holdsQuery(e[0]))
      return [...this.stmt(readStmt(e[0].items), scope, ctes, `${path}>sub`).values()][0] ?? OPAQUE;
    if (e.length === 1 && isGroup(e[0])) return this.value(e[0].items, scope, ctes, path);
    if (e.length === 3 && e[1].type === '.' && isWord(e[0]) && isWord(e[2]))
      return this.column(scope, e[2].v, e[0].v);
    if (e.length === 1 && isWord(e[0])) return this.column(scope, e[0].v);
    return paramsOnly(e) ? { k: 'key', id: show(e) } : OPAQUE;
  }

  /** Column `col` (of relation `alias`, else of the only relation that has it), here or in an outer scope. */
  private column(scope: Scope | undefined, col: string, alias?: string): Val {
    const of = (r: RelState): Val =>
      r.cols.get(col) ?? (r.table && this.keys[r.table] === col ? (r.pinned ?? OPAQUE) : OPAQUE);
    for (let s = scope; s; s = s.parent) {
      const found = s.rels.filter((r) =>
        alias ? r.rel.alias === alias : r.cols.has(col) || (r.table && this.keys[r.table] === col),
      );
      if (found.length) return found.length === 1 ? of(found[0]) : OPAQUE;
      // An unqualified column no CTE here has belongs to this block's table: not the key, so opaque.
      if (!alias && s.rels.some((r) => r.table)) return OPAQUE;
    }
    return OPAQUE;
  }

  /** Every subquery inside an expression, analysed with the block's relations visible. */
  scan(items: Item[], scope: Scope, ctes: Map<string, Cols>, path: string): void {
    for (const x of items) {
      if (!isGroup(x)) continue;
      if (holdsQuery(x)) this.stmt(readStmt((x as Group).items), scope, ctes, `${path}>sub`);
      else this.scan(x.items, scope, ctes, path);
    }
  }
}
