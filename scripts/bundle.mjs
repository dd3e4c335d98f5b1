#!/usr/bin/env node
/**
 * `node scripts/bundle.mjs [DIST]` (the last step of `npm run build`; DIST defaults to dist/): bundles
 * tsc's output into DIST/bundle.js, one file for every public entry (package.json "exports", and the
 * bin), and turns each entry file into a stub that returns its entry from the bundle. A process then
 * loads one file of ours, not ~230: about half the CPU of requiring the library (docs/PERFORMANCE.md,
 * "Worker boot"). npm packages stay outside the bundle (`packages: 'external'`), so the app's copies
 * of Nest, TypeORM and pg are the ones used.
 *
 * - Each entry is a lazy getter of the bundle: a subpath's modules (and the packages they import) load
 *   only when the app requires that subpath. All entries share the bundle's one copy of each module,
 *   so a class is the same DI token whichever entry it came from.
 * - tsc's output is CommonJS: esbuild keeps each file as a lazily evaluated module, in the order
 *   Node's `require` would run them (cycles included), and keeps its names.
 * - The stub lists its entry's export names in dead code (`0 && (module.exports = {...})`), which
 *   Node's ESM loader reads (cjs-module-lexer), so `import { DurableStep } from 'nestjs-durable-execution'`
 *   works from ESM as before.
 * - The rest of tsc's tree stays in DIST: its `.d.ts` files are the package's types, and it keeps
 *   working for what requires its files by path (the older `dist/src/cli/migrate.js`).
 */
import { build } from 'esbuild';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const dist = resolve(process.argv[2] ?? join(root, 'dist'));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const BIN = 'cli';

/** Entry name → its file under DIST (`src/index.js`): the "require" target of each export, and the bin. */
function entries() {
  const out = {};
  for (const [key, target] of Object.entries(pkg.exports)) {
    if (typeof target !== 'object') continue; // ./package.json
    out[key === '.' ? 'root' : key.slice(2)] = target.require.replace(/^\.\/dist\//, '');
  }
  out[BIN] = Object.values(pkg.bin)[0].replace(/^dist\//, '');
  return out;
}

const IDENT = /^[A-Za-z_$][\w$]*$/;
const STUB = '// Bundled: this entry is in bundle.js';

function stub(name, file, names) {
  const bundle = relative(dirname(join(dist, file)), join(dist, 'bundle.js'));
  const path = JSON.stringify(bundle.startsWith('.') ? bundle : `./${bundle}`);
  const lines = [
    name === BIN ? '#!/usr/bin/env node' : null,
    '"use strict";',
    `${STUB} (scripts/bundle.mjs); the .d.ts files beside this one are its types.`,
    `const entry = require(${path})[${JSON.stringify(name)}];`,
    'module.exports = entry;',
    name === BIN ? 'if (require.main === module) entry.runCli(process.argv.slice(2));' : null,
    // Read by Node's ESM loader for named imports; never run.
    `0 && (module.exports = { ${names.filter((n) => IDENT.test(n) && n !== '__esModule').join(', ')} });`,
  ];
  return lines.filter((l) => l !== null).join('\n') + '\n';
}

async function main() {
  const all = entries();
  // A second run over its own stubs would bundle the old bundle into the new one.
  for (const file of Object.values(all))
    if (readFileSync(join(dist, file), 'utf8').includes(STUB))
      throw new Error(`${file} is a stub already: compile with tsc again (npm run build) before bundling`);
  const requireFromDist = createRequire(join(dist, 'package.json'));
  // Their names, read from tsc's tree before the stubs replace its entry files.
  const names = Object.fromEntries(
    Object.entries(all).map(([name, file]) => [name, Object.keys(requireFromDist(`./${file}`))]),
  );
  const getters = Object.entries(all)
    .map(
      ([name, file]) =>
        `Object.defineProperty(exports, ${JSON.stringify(name)}, { enumerable: true, get: () => require(${JSON.stringify(`./${file}`)}) });`,
    )
    .join('\n');
  await build({
    stdin: { contents: getters, resolveDir: dist, sourcefile: 'bundle-entries.js', loader: 'js' },
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    packages: 'external',
    outfile: join(dist, 'bundle.js'),
    legalComments: 'none',
    logLevel: 'error',
  });
  if (!names[BIN].includes('runCli'))
    throw new Error(`the bin (${all[BIN]}) must export runCli; it exports ${names[BIN].join(', ')}`);
  for (const [name, file] of Object.entries(all)) writeFileSync(join(dist, file), stub(name, file, names[name]));
}

main().catch((err) => {
  console.error(`bundle: ${err.stack ?? err}`);
  process.exit(1);
});
