import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * `node -r ts-node/register/transpile-only bench/cpu-profile.ts DIR [TOP]`
 * Sums the V8 CPU profiles in DIR (written by worker processes run with BENCH_CPU_PROF=DIR) by self
 * time: per area (the library's own code by file, each npm package, node internals, GC) and the TOP
 * hottest functions. Idle time is left out, so the shares are of the CPU the process really used.
 */

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Where a frame's code lives: `src/...` file, `pkg:<name>`, `node:<internal>` or a V8 marker. */
function area(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/');
    return `pkg:${rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]}`;
  }
  const src = url.indexOf('/src/');
  if (src >= 0) return url.slice(src + 1);
  if (url.startsWith('node:')) return 'node-internals';
  return url.replace(/^.*\/bench\//, 'bench/');
}

function main(): void {
  const [dir, topArg] = process.argv.slice(2);
  if (!dir) {
    console.error('usage: bench/cpu-profile.ts DIR [TOP]');
    process.exit(2);
  }
  const top = Number(topArg ?? 25);
  const byArea = new Map<string, number>();
  const byFn = new Map<string, number>();
  let total = 0;
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  for (const f of files) {
    const p = JSON.parse(readFileSync(join(dir, f), 'utf8')) as Profile;
    const nodes = new Map(p.nodes.map((n) => [n.id, n]));
    for (let i = 0; i < p.samples.length; i++) {
      const n = nodes.get(p.samples[i]);
      if (!n) continue;
      const { functionName, url, lineNumber } = n.callFrame;
      if (functionName === '(idle)') continue;
      const us = p.timeDeltas[i] ?? 0;
      total += us;
      const a = area(url, functionName);
      byArea.set(a, (byArea.get(a) ?? 0) + us);
      const key = `${functionName || '(anonymous)'} ${a}:${lineNumber + 1}`;
      byFn.set(key, (byFn.get(key) ?? 0) + us);
    }
  }
  const pct = (us: number) => `${((100 * us) / total).toFixed(1).padStart(5)} %`;
  console.log(`${files.length} profiles, ${(total / 1e6).toFixed(2)} s of CPU (idle excluded)\n\nBy area`);
  for (const [a, us] of [...byArea].sort((x, y) => y[1] - x[1]).slice(0, 20)) console.log(`${pct(us)}  ${a}`);
  console.log(`\nTop ${top} functions by self time`);
  for (const [k, us] of [...byFn].sort((x, y) => y[1] - x[1]).slice(0, top)) console.log(`${pct(us)}  ${k}`);
}

main();
