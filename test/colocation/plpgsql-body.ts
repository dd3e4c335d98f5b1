import { isWord, parseTree, show, splitItems } from './sql-tree';

/** The statements of a PL/pgSQL body: the SQL ones (INSERT, UPDATE, DELETE, SELECT, WITH), `into` dropped. */
export function bodyStatements(body: string): string[] {
  const tree = parseTree(body);
  return splitItems(tree, (x) => x.type === ';')
    .map((stmt) => {
      const start = stmt.findIndex((x) => isWord(x, 'insert', 'update', 'delete', 'select', 'with'));
      if (start < 0 || isWord(stmt[start - 1], 'perform')) return '';
      const part = stmt.slice(start);
      const into = part.findIndex((x, i) => isWord(x, 'into') && !isWord(part[i - 1], 'insert'));
      if (into < 0) return show(part);
      const from = part.findIndex((x, i) => i > into && isWord(x, 'from'));
      return show([...part.slice(0, into), ...(from < 0 ? [] : part.slice(from))]);
    })
    .filter((s) => s);
}
