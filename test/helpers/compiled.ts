import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.join(__dirname, '..', '..');

/** The worker entry points the tests fork; compiled together, once per source state. */
const ENTRIES = [
  'test/fixtures/worker-app.ts',
  'test/fixtures/approval-worker-app.ts',
  'test/fixtures/zombie-sender-app.ts',
  'test/fixtures/zombie-socket-app.ts',
  'test/fixtures/tx-worker-app.ts',
  'test/fixtures/ai-agent-app.ts',
  'test/fixtures/fork-agent-app.ts',
  'test/langgraph/graph-worker.ts',
  'test/openai-agents/agents-app.ts',
  'test/chaos/chaos-worker.ts',
  'examples/rolling-deploy/pod.ts',
  'test/upgrade/upgrade-app.ts',
];

/** Every .ts file under `dir` with its mtime, for the cache key. */
function sources(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== 'node_modules') sources(p, out);
    } else if (e.name.endsWith('.ts')) out.push(`${p}:${statSync(p).mtimeMs}`);
  }
  return out;
}

/**
 * The JavaScript of a TypeScript entry file (a worker process the tests fork), compiled with the
 * library sources it imports into `.tmp/compiled-<key>/`: the child starts on plain node without
 * loading ts-node and the TypeScript compiler, so a crash test's kill finds a worker up sooner.
 * Emit only (`tsc --noCheck`; `npm run lint` type-checks the same files). The key hashes the paths and
 * mtimes of src/, migrations/, test/ and examples/rolling-deploy/, so an edit recompiles. Parallel jest
 * workers may compile at the same moment: each writes its own folder and renames it into place; the
 * first rename wins.
 */
export function compiledEntry(entry: string): string {
  const js = built.get(entry) ?? compile(entry);
  built.set(entry, js);
  return js;
}

/** Entries this process has compiled or found already: the source walk runs once per entry. */
const built = new Map<string, string>();

function compile(entry: string): string {
  const key = createHash('sha1')
    .update(
      ['src', 'migrations', 'test', 'examples/rolling-deploy']
        .flatMap((d) => sources(path.join(ROOT, d)))
        .sort()
        .join('\n'),
    )
    .digest('hex')
    .slice(0, 12);
  const outDir = path.join(ROOT, '.tmp', `compiled-${key}`);
  const js = path.join(outDir, path.relative(ROOT, entry).replace(/\.ts$/, '.js'));
  if (existsSync(js)) return js;
  const work = `${outDir}.${process.pid}.${Date.now()}`;
  mkdirSync(work, { recursive: true });
  const tsconfig = path.join(work, 'tsconfig.json');
  writeFileSync(
    tsconfig,
    JSON.stringify({
      extends: path.join(ROOT, 'tsconfig.json'),
      compilerOptions: { outDir: work, rootDir: ROOT, declaration: false, sourceMap: false, types: ['node'] },
      files: ENTRIES.map((e) => path.join(ROOT, e)),
      include: [],
    }),
  );
  execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', tsconfig, '--noCheck'], {
    cwd: ROOT,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  try {
    renameSync(work, outDir);
  } catch {
    rmSync(work, { recursive: true, force: true }); // another process got there first
  }
  // Builds of older source states, left more than an hour ago, are of no use any more.
  const tmp = path.dirname(outDir);
  for (const d of readdirSync(tmp)) {
    const p = path.join(tmp, d);
    if (d.startsWith('compiled-') && p !== outDir && Date.now() - statSync(p).mtimeMs > 3_600_000)
      rmSync(p, { recursive: true, force: true });
  }
  if (!existsSync(js)) throw new Error(`compiling ${entry} produced no ${js}`);
  return js;
}
