import * as fs from 'node:fs';
import * as path from 'node:path';
import * as ts from 'typescript';
import { DEFAULT_NAMES } from '../../src/store/durable-names';

/**
 * The statements src/store sends, read from the code as it is when the check runs:
 * - every top-level constant named `*_SQL` of every module (exported or not), evaluated with the default
 *   names (a `Record` of statements gives one per entry: `HISTORY_SQL.events.after`);
 * - every call site that sends SQL: a call of `query(...)` / `.query(...)`, and of any function that
 *   passes one of its parameters on as a query's text (`runFenced`), with what its argument resolves to
 *   (a constant, both arms of a `?:`, or an inline literal).
 * An argument that resolves to none of these (a local variable) is reported as `dynamic`: the check
 * needs it listed with the statements it may carry.
 */
export interface StoreStatements {
  /** Statement id (`src/store/x.ts#NAME`, `#NAME.key.sub`, or `src/store/x.ts:"inline text"`) → text. */
  texts: Map<string, string>;
  /** Ids of constants named *_SQL (statements and fragments). */
  constants: Set<string>;
  /** Statement ids passed to a query, each with the call sites (file:line) that send it. */
  sent: Map<string, string[]>;
  /** Call sites whose SQL argument is a local value: `file#function:name` → file:line. */
  dynamic: Map<string, string>;
}

/** The one module that hands SQL to the pool for everyone else. */
const GATEWAY = 'src/store/durable-database.ts';
const ROOT = path.resolve(__dirname, '../..');

/**
 * Whose src/store is read: this checkout's by default; test/upgrade reads a previous release's tree
 * (its sources, its modules loaded by `load`, its default names).
 */
export interface StoreTree {
  root: string;
  names: object;
}

function filesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return filesUnder(full);
    return e.name.endsWith('.ts') && !e.name.endsWith('.spec.ts') ? [full] : [];
  });
}

/** The module's top-level constants, exported or not: its source compiled and run with them exposed. */
function moduleConstants(
  file: string,
  source: ts.SourceFile,
  load: (id: string) => unknown,
): Record<string, unknown> {
  const names = source.statements
    .filter(ts.isVariableStatement)
    .flatMap((s) => s.declarationList.declarations.map((d) => d.name))
    .filter(ts.isIdentifier)
    .map((n) => n.text);
  const js = ts.transpileModule(source.text, {
    compilerOptions: {
      module: ts.ModuleKind.CommonJS,
      target: ts.ScriptTarget.ES2022,
      experimentalDecorators: true,
      emitDecoratorMetadata: true,
      esModuleInterop: true,
    },
    fileName: file,
  }).outputText;
  const expose = names.map((n) => `${n}: typeof ${n} === 'undefined' ? undefined : ${n}`).join(', ');
  const mod = { exports: {} as Record<string, unknown> };
  const req = (p: string): unknown => load(p.startsWith('.') ? path.resolve(path.dirname(file), p) : p);
  new Function('exports', 'require', 'module', `${js}\n;module.exports.__constants__ = { ${expose} };`)(
    mod.exports,
    req,
    mod,
  );
  const own = mod.exports.__constants__ as Record<string, unknown>;
  return Object.fromEntries(names.map((n) => [n, mod.exports[n] ?? own[n]]));
}

/** A constant's statements: a text, a function of the names, or a record of them (one id per entry). */
function flatten(id: string, v: unknown, out: Map<string, string>, names: object): void {
  if (typeof v === 'string') out.set(id, v);
  else if (typeof v === 'function') {
    // A builder with more than the names (`X_SQL(t, partition)`) gets placeholders for the rest.
    const more = Array.from({ length: Math.max(0, v.length - 1) }, (_, i) => `__arg${i + 1}__`);
    out.set(id, String((v as (...a: unknown[]) => unknown)(names, ...more)));
  } else if (v && typeof v === 'object')
    for (const [k, x] of Object.entries(v)) flatten(`${id}.${k}`, x, out, names);
}

/** An inline template's text, `${x.runs}`-style names filled in with the default names. */
function inlineText(node: ts.Expression, defaults: object): string | undefined {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (!ts.isTemplateExpression(node)) return undefined;
  const names = defaults as Record<string, unknown>;
  return node.templateSpans.reduce((text, span) => {
    const e = span.expression;
    const prop = ts.isPropertyAccessExpression(e) ? e.name.text : undefined;
    const filled = prop && typeof names[prop] === 'string' ? (names[prop] as string) : '__expr__';
    return text + filled + span.literal.text;
  }, node.head.text);
}

/** The function (declaration, method or arrow) around a node, and its name. */
function enclosing(node: ts.Node): { fn?: ts.SignatureDeclaration; name: string } {
  for (let n = node.parent; n; n = n.parent) {
    if (
      ts.isFunctionDeclaration(n) ||
      ts.isMethodDeclaration(n) ||
      ts.isArrowFunction(n) ||
      ts.isFunctionExpression(n)
    ) {
      const name = n.name && ts.isIdentifier(n.name) ? n.name.text : '';
      return { fn: n, name };
    }
  }
  return { name: '' };
}

export function storeStatements(
  load: (id: string) => unknown,
  tree: StoreTree = { root: ROOT, names: DEFAULT_NAMES },
): StoreStatements {
  const rel = (file: string): string => path.relative(tree.root, file).split(path.sep).join('/');
  const files = filesUnder(path.join(tree.root, 'src/store'));
  const sources = new Map(
    files.map((f) => [f, ts.createSourceFile(f, fs.readFileSync(f, 'utf8'), ts.ScriptTarget.ES2022, true)]),
  );
  const out: StoreStatements = {
    texts: new Map(),
    constants: new Set(),
    sent: new Map(),
    dynamic: new Map(),
  };
  const defined = new Map<string, Set<string>>(); // file → its top-level constant names
  for (const [file, source] of sources) {
    const consts = moduleConstants(file, source, load);
    defined.set(file, new Set(Object.keys(consts)));
    for (const [name, v] of Object.entries(consts)) {
      if (!name.endsWith('_SQL')) continue;
      const before = out.texts.size;
      flatten(`${rel(file)}#${name}`, v, out.texts, tree.names);
      if (out.texts.size === before) throw new Error(`${rel(file)}#${name} is no SQL text`);
      for (const id of out.texts.keys())
        if (id === `${rel(file)}#${name}` || id.startsWith(`${rel(file)}#${name}.`)) out.constants.add(id);
    }
  }
  /** The file an imported name comes from, in `source`; undefined when it is not imported. */
  const importedFrom = (source: ts.SourceFile, name: string): string | undefined => {
    for (const s of source.statements) {
      if (
        !ts.isImportDeclaration(s) ||
        !s.importClause?.namedBindings ||
        !ts.isNamedImports(s.importClause.namedBindings)
      )
        continue;
      const spec = s.importClause.namedBindings.elements.find((e) => e.name.text === name);
      if (!spec) continue;
      const target =
        path.resolve(path.dirname(source.fileName), (s.moduleSpecifier as ts.StringLiteral).text) + '.ts';
      const own = (spec.propertyName ?? spec.name).text;
      if (defined.get(target)?.has(own)) return `${rel(target)}#${own}`;
      const again = sources.get(target);
      return again ? importedFrom(again, own) : undefined;
    }
    return undefined;
  };
  const wrappers = new Map<string, number>(); // function name → index of its SQL parameter
  const send = (ids: string[], site: string): void =>
    ids.forEach((id) => out.sent.set(id, [...(out.sent.get(id) ?? []), site]));
  /** What an SQL argument resolves to: statement ids, or a wrapper / dynamic site noted on the way. */
  const resolve = (arg: ts.Expression, source: ts.SourceFile, site: string): string[] => {
    if (ts.isParenthesizedExpression(arg)) return resolve(arg.expression, source, site);
    if (ts.isConditionalExpression(arg))
      return [...resolve(arg.whenTrue, source, site), ...resolve(arg.whenFalse, source, site)];
    const inline = inlineText(arg, tree.names);
    if (inline !== undefined) {
      const id = `${rel(source.fileName)}:"${inline.trim().replace(/\s+/g, ' ').slice(0, 60)}"`;
      out.texts.set(id, inline);
      return [id];
    }
    // `X_SQL(t, name)`: the builder's statement.
    if (ts.isCallExpression(arg) && ts.isIdentifier(arg.expression) && arg.expression.text.endsWith('_SQL'))
      return resolve(arg.expression, source, site);
    // DurableDatabase.query hands its callers' text to the pool: those callers are enumerated.
    if (ts.isObjectLiteralExpression(arg) && rel(source.fileName) === GATEWAY) return [];
    if (!ts.isIdentifier(arg)) throw new Error(`${site}: SQL argument ${arg.getText()} is not a constant`);
    const name = arg.text;
    const { fn, name: fnName } = enclosing(arg);
    const param = fn?.parameters.findIndex((p) => ts.isIdentifier(p.name) && p.name.text === name) ?? -1;
    if (param >= 0 && fnName) {
      wrappers.set(fnName, param);
      return [];
    }
    if (param >= 0) return []; // an adapter `(sql, params) => db.query(sql, params)`: its callers' statements are sent
    if (defined.get(source.fileName)?.has(name) && name.endsWith('_SQL'))
      return [`${rel(source.fileName)}#${name}`];
    const imported = importedFrom(source, name);
    if (imported) return [imported];
    out.dynamic.set(`${rel(source.fileName)}#${fnName}:${name}`, site);
    return [];
  };
  const visitAll = (pass: (call: ts.CallExpression, callee: string, source: ts.SourceFile) => void): void => {
    for (const source of sources.values()) {
      const visit = (n: ts.Node): void => {
        if (ts.isCallExpression(n)) {
          const c = n.expression;
          const callee = ts.isIdentifier(c) ? c.text : ts.isPropertyAccessExpression(c) ? c.name.text : '';
          if (callee) pass(n, callee, source);
        }
        ts.forEachChild(n, visit);
      };
      visit(source);
    }
  };
  const siteOf = (n: ts.Node, source: ts.SourceFile): string =>
    `${rel(source.fileName)}:${source.getLineAndCharacterOfPosition(n.getStart()).line + 1}`;
  visitAll((call, callee, source) => {
    if (callee === 'query' && call.arguments[0])
      send(resolve(call.arguments[0], source, siteOf(call, source)), siteOf(call, source));
  });
  visitAll((call, callee, source) => {
    const at = wrappers.get(callee);
    if (at !== undefined && callee !== 'query' && call.arguments[at])
      send(resolve(call.arguments[at], source, siteOf(call, source)), siteOf(call, source));
  });
  return out;
}
