import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const ROOT = join(__dirname, '..');
/** Set by bench/all.ts to a directory where every part's entries are compiled already. */
export const BUILD_ENV = 'BENCH_BUILD';

/** What the parts compile: `npm run bench` compiles them all at once (`compileAll`). */
export const BENCH_ENTRIES = [
  join(ROOT, 'bench', 'worker-process.ts'),
  join(ROOT, 'bench', 'peers', 'engine.ts'),
  join(ROOT, 'src', 'index.ts'),
];

/**
 * Compiles bench entry points (and the library sources they import) to JavaScript under
 * `.tmp/<name>` (emit only, `--noCheck`: `npm run lint` type-checks the same files), so that the
 * processes a part forks run on plain node, as a deployed worker does: no ts-node start-up, no
 * TypeScript compiler in their memory. Returns the compiled path of each entry.
 *
 * Not under bench/: from there `pg` would resolve to bench/node_modules' copy (the peers' pinned one),
 * a second pg module beside the one TypeORM loads, and the library's pg hooks (the fenced transport's
 * query check, the LISTEN connection) would sit on a different module than its pool: an app loads one.
 * `share: false` compiles to `.tmp/<name>` even under `npm run bench` (a part whose build differs).
 */
export function compileBench(name: string, entries: string[], share = true): string[] {
  // `npm run bench` compiles every part's entries once, before the first part (BENCH_BUILD).
  const shared = share ? process.env[BUILD_ENV] : undefined;
  if (shared) {
    const built = entries.map((e) => join(shared, relative(ROOT, e)).replace(/\.ts$/, '.js'));
    if (built.every((f) => existsSync(f))) return built;
  }
  const outDir = join(ROOT, '.tmp', name);
  mkdirSync(outDir, { recursive: true });
  const tsconfig = join(outDir, 'tsconfig.bench.json');
  writeFileSync(
    tsconfig,
    JSON.stringify({
      extends: join(ROOT, 'tsconfig.json'),
      compilerOptions: { outDir, rootDir: ROOT, declaration: false, sourceMap: false, types: ['node'] },
      files: entries,
      include: [],
    }),
  );
  execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', tsconfig, '--noCheck'], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  return entries.map((e) => join(outDir, relative(ROOT, e)).replace(/\.ts$/, '.js'));
}

/** Compiles every part's entries once, for the parts of one `npm run bench` (BENCH_BUILD). */
export function compileAll(): string {
  compileBench('bench-all', BENCH_ENTRIES);
  return join(ROOT, '.tmp', 'bench-all');
}

/**
 * Compiles `entries` and every entry of the package (package.json "exports" and its bin) to `.tmp/<name>`,
 * then bundles the library there as `npm run build` does (scripts/bundle.mjs): what requires its `src`
 * entries loads the library as an app loads the published package. Returns the compiled `entries`.
 */
export function compileBundled(name: string, entries: string[]): string[] {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    exports: Record<string, string | { require: string }>;
    bin: Record<string, string>;
  };
  const targets = [
    ...Object.values(pkg.exports).flatMap((t) => (typeof t === 'object' ? [t.require] : [])),
    ...Object.values(pkg.bin),
  ];
  const sources = targets.map((t) => join(ROOT, t.replace(/^(\.\/)?dist\//, '').replace(/\.js$/, '.ts')));
  const built = compileBench(name, [...entries, ...sources], false);
  execFileSync(process.execPath, [join(ROOT, 'scripts', 'bundle.mjs'), join(ROOT, '.tmp', name)], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  return built.slice(0, entries.length);
}
