/**
 * The app processes the demo starts run from JavaScript, not through ts-node: the demo transpiles the
 * library and this example once, file by file (`transpileModule`, the repository's tsconfig, as
 * `ts-node/register/transpile-only` would), into a cache under os.tmpdir() keyed by the sources' sizes
 * and mtimes. A process that starts in a second rather than in several is SIGKILLed and replaced
 * sooner. Bare imports resolve through NODE_PATH to the repository's node_modules. If anything goes
 * wrong, or with TRIAGE_TS_NODE=1, the processes run through ts-node instead.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface AppRuntime {
  /** The entry file for a module path relative to the repository root (no extension). */
  entry(relNoExt: string): string;
  execArgv: string[];
  env: Record<string, string>;
}

const ROOT = path.resolve(__dirname, '..', '..');
const SOURCES = ['src', 'migrations', 'examples/support-triage', 'examples/purchase-order/orchestrator'];

function walk(dir: string, out: string[]): void {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') && !e.name.endsWith('.spec.ts')) out.push(p);
  }
}

function tsNode(): AppRuntime {
  return {
    entry: (rel) => path.join(ROOT, `${rel}.ts`),
    execArgv: ['-r', 'ts-node/register/transpile-only'],
    env: { TS_NODE_TRANSPILE_ONLY: 'true' },
  };
}

export function prepareAppRuntime(): AppRuntime {
  if (process.env.TRIAGE_TS_NODE) return tsNode();
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const ts = require('typescript') as typeof import('typescript');
    const files: string[] = [];
    for (const s of SOURCES) walk(path.join(ROOT, s), files);
    const h = createHash('sha256');
    for (const f of files.sort()) {
      const st = fs.statSync(f);
      h.update(`${f}:${st.size}:${st.mtimeMs}\n`);
    }
    const repoTag = createHash('sha256').update(ROOT).digest('hex').slice(0, 8);
    const cacheRoot = path.join(os.tmpdir(), `nestjs-durable-execution-triage-js-${repoTag}`);
    const version = h.digest('hex').slice(0, 16);
    const out = path.join(cacheRoot, version);
    if (!fs.existsSync(out)) {
      const cfg = ts.readConfigFile(path.join(ROOT, 'tsconfig.json'), (p) => ts.sys.readFile(p));
      const parsed = ts.parseJsonConfigFileContent(cfg.config, ts.sys, ROOT);
      const compilerOptions = {
        ...parsed.options,
        sourceMap: false,
        inlineSourceMap: true,
        declaration: false,
      };
      const tmp = `${out}.tmp-${process.pid}-${Date.now()}`;
      for (const f of files) {
        const js = ts.transpileModule(fs.readFileSync(f, 'utf8'), {
          compilerOptions,
          fileName: f,
        }).outputText;
        const target = path.join(tmp, path.relative(ROOT, f)).replace(/\.ts$/, '.js');
        fs.mkdirSync(path.dirname(target), { recursive: true });
        fs.writeFileSync(target, js);
      }
      try {
        fs.renameSync(tmp, out); // atomic: a concurrent demo sees all of it or none of it
      } catch {
        fs.rmSync(tmp, { recursive: true, force: true }); // another demo got there first
      }
      for (const old of fs.readdirSync(cacheRoot)) {
        const p = path.join(cacheRoot, old);
        // Other versions of the sources (and half-written ones) older than an hour.
        if (old !== version && Date.now() - fs.statSync(p).mtimeMs > 3_600_000)
          fs.rmSync(p, { recursive: true, force: true });
      }
    }
    const nodePath = [path.join(ROOT, 'node_modules'), process.env.NODE_PATH]
      .filter(Boolean)
      .join(path.delimiter);
    return { entry: (rel) => path.join(out, `${rel}.js`), execArgv: [], env: { NODE_PATH: nodePath } };
  } catch {
    return tsNode();
  }
}
