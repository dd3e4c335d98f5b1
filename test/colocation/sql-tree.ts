/**
 * A small SQL reader for the co-location check (src/store/colocation.spec.ts): PostgreSQL text as
 * tokens, then as a tree of parenthesised groups. It reads what the library writes (CTEs, UPDATE ... FROM,
 * INSERT ... SELECT, LATERAL, dollar quotes), not every SQL there is: a text it cannot read throws,
 * so a statement it does not understand fails the check instead of passing unread.
 */

/** A token; words are lower-cased unless they were quoted. */
export interface Tok {
  type: 'word' | 'param' | 'str' | 'num' | 'op' | ',' | ';' | '.';
  v: string;
}

/** A parenthesised group: its items, each a token or a nested group. */
export interface Group {
  type: 'group';
  items: Item[];
}

export type Item = Tok | Group;

const OP_CHARS = '+-*/<>=~!@#%^&|:[]?';

/** The tokens of `sql`; comments dropped, strings kept whole. */
export function tokenize(sql: string): Tok[] {
  const out: Tok[] = [];
  let i = 0;
  while (i < sql.length) {
    const c = sql[i];
    if (/\s/.test(c)) {
      i++;
    } else if (sql.startsWith('--', i)) {
      const end = sql.indexOf('\n', i);
      i = end < 0 ? sql.length : end;
    } else if (sql.startsWith('/*', i)) {
      const end = sql.indexOf('*/', i + 2);
      if (end < 0) throw new Error('unterminated comment');
      i = end + 2;
    } else if (c === "'") {
      let j = i + 1;
      for (;;) {
        if (j >= sql.length) throw new Error(`unterminated string at ${i}`);
        if (sql[j] === "'" && sql[j + 1] === "'") j += 2;
        else if (sql[j] === "'") break;
        else j++;
      }
      out.push({ type: 'str', v: sql.slice(i + 1, j).replace(/''/g, "'") });
      i = j + 1;
    } else if (c === '"') {
      const end = sql.indexOf('"', i + 1);
      if (end < 0) throw new Error(`unterminated identifier at ${i}`);
      out.push({ type: 'word', v: sql.slice(i + 1, end) });
      i = end + 1;
    } else if (c === '$' && /[0-9]/.test(sql[i + 1] ?? '')) {
      const m = /^\$[0-9]+/.exec(sql.slice(i))!;
      out.push({ type: 'param', v: m[0] });
      i += m[0].length;
    } else if (c === '$') {
      const m = /^\$[A-Za-z_]*\$/.exec(sql.slice(i));
      if (!m) throw new Error(`stray $ at ${i}`);
      const end = sql.indexOf(m[0], i + m[0].length);
      if (end < 0) throw new Error(`unterminated ${m[0]} quote`);
      out.push({ type: 'str', v: sql.slice(i + m[0].length, end) });
      i = end + m[0].length;
    } else if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_$]*/.exec(sql.slice(i))!;
      out.push({ type: 'word', v: m[0].toLowerCase() });
      i += m[0].length;
    } else if (/[0-9]/.test(c)) {
      const m = /^[0-9]+(\.[0-9]+)?/.exec(sql.slice(i))!;
      out.push({ type: 'num', v: m[0] });
      i += m[0].length;
    } else if (c === '(' || c === ')') {
      out.push({ type: 'op', v: c });
      i++;
    } else if (c === ',' || c === ';' || c === '.') {
      out.push({ type: c, v: c });
      i++;
    } else if (OP_CHARS.includes(c)) {
      let j = i;
      while (j < sql.length && OP_CHARS.includes(sql[j]) && !sql.startsWith('--', j)) j++;
      out.push({ type: 'op', v: sql.slice(i, j) });
      i = j;
    } else {
      throw new Error(`unexpected character ${JSON.stringify(c)} at ${i}`);
    }
  }
  return out;
}

/** The tokens as a tree of parenthesised groups. */
export function groupTokens(tokens: Tok[]): Item[] {
  const stack: Item[][] = [[]];
  for (const t of tokens) {
    if (t.type === 'op' && t.v === '(') stack.push([]);
    else if (t.type === 'op' && t.v === ')') {
      const items = stack.pop();
      if (!items || !stack.length) throw new Error('unbalanced )');
      stack[stack.length - 1].push({ type: 'group', items });
    } else stack[stack.length - 1].push(t);
  }
  if (stack.length !== 1) throw new Error('unbalanced (');
  return stack[0];
}

export const parseTree = (sql: string): Item[] => groupTokens(tokenize(sql));

export const isGroup = (x: Item | undefined): x is Group => x?.type === 'group';
/** A word token (the guard leaves other tokens in the false branch). */
export type Word = Tok & { type: 'word' };
export const isWord = (x: Item | undefined, ...words: string[]): x is Word =>
  !!x && x.type === 'word' && (words.length === 0 || words.includes(x.v));

/** The items of `items` split at top-level tokens matching `at` (the separators dropped). */
export function splitItems(items: Item[], at: (x: Item, i: number) => boolean): Item[][] {
  const parts: Item[][] = [[]];
  items.forEach((x, i) => (at(x, i) ? parts.push([]) : parts[parts.length - 1].push(x)));
  return parts;
}

export const splitCommas = (items: Item[]): Item[][] => splitItems(items, (x) => x.type === ',');

/** A group holds a query when it begins with SELECT, WITH or VALUES. */
export const holdsQuery = (g: Group): boolean => isWord(g.items[0], 'select', 'with', 'values');

/** The SQL of `items`, for messages. */
export function show(items: Item[]): string {
  return items
    .map((x) => (isGroup(x) ? `(${show(x.items)})` : x.type === 'str' ? `'${x.v.replace(/'/g, "''")}'` : x.v))
    .join(' ')
    .replace(/ \. /g, '.');
}
