import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from 'pg';
import { BlockRunner } from './blocks';
import { log } from './cli';
import { dropDatabase, withDatabase } from './database';

/**
 * Starting the peer runners (bench/peers/*.mjs) and the engine's (bench/peers/engine.ts, compiled), each
 * on a fresh database of its own: once for a single timed run (`runOnce`, the runner's one-shot mode) or
 * in block mode (`startBlocks`), where the parent alternates its blocks with another runner's.
 */

const BENCH_DIR = __dirname;
const PEER_PACKAGES = ['@dbos-inc/dbos-sdk', 'graphile-worker', 'pg-boss'];

export type PeerName = 'engine' | 'dbos' | 'graphile-worker' | 'pg-boss';

/** One workload of one runner. */
export interface PeerWorkload {
  peer: PeerName;
  workload: string;
  /** Figure key in the results: `<peer>.<workload>`. */
  key: string;
}

export const workloadOf = (peer: PeerName, workload: string): PeerWorkload => ({
  peer,
  workload,
  key: `${peer}.${workload}`,
});

/** What a runner prints for a timed run or a block. */
export interface PeerSample {
  peer?: string;
  version?: string;
  workload?: string;
  n: number;
  perSecond?: number | null;
  elapsedMs?: number | null;
  p50Ms?: number | null;
  p99Ms?: number | null;
  statementsPerUnit?: number | null;
  commitsPerUnit?: number | null;
  notes?: string;
  [k: string]: unknown;
}

/** Installs bench/package.json's peers (npm ci) unless every one of them is there already. */
export function ensurePeersInstalled(): Record<string, string> {
  const installed = () =>
    PEER_PACKAGES.every((p) => existsSync(join(BENCH_DIR, 'node_modules', p, 'package.json')));
  if (!installed()) {
    log('installing the peer libraries: npm ci --prefix bench (bench/package-lock.json)');
    execFileSync('npm', ['ci', '--prefix', BENCH_DIR, '--no-audit', '--no-fund', '--loglevel=error'], {
      stdio: ['ignore', 'inherit', 'inherit'],
    });
  }
  return Object.fromEntries(
    PEER_PACKAGES.map((p) => [
      p,
      JSON.parse(readFileSync(join(BENCH_DIR, 'node_modules', p, 'package.json'), 'utf8')).version as string,
    ]),
  );
}

async function adminQuery(admin: string, sql: string): Promise<void> {
  const c = new Client({ connectionString: admin });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end().catch(() => undefined);
  }
}

/** A fresh, empty database for one runner; `drop()` removes it. */
export async function freshDatabase(admin: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `dx_peer_${randomBytes(4).toString('hex')}`;
  await adminQuery(admin, `create database ${name}`);
  return { url: withDatabase(admin, name), drop: () => dropDatabase(admin, name).catch(() => undefined) };
}

/** The node arguments of a runner: `engineJs` is bench/peers/engine.ts compiled (see compileBench). */
function runnerArgs(w: PeerWorkload, engineJs: string, url: string, extra: string[]): string[] {
  const script = w.peer === 'engine' ? [engineJs] : [join(BENCH_DIR, 'peers', `${w.peer}.mjs`)];
  return [...script, '--url', url, '--workload', w.workload, ...extra];
}

/** Runs one workload once (the runner's one-shot mode) in a fresh database and process: its JSON line. */
export async function runOnce(
  admin: string,
  engineJs: string,
  w: PeerWorkload,
  opts: { n: number; concurrency: number; settleMs?: number },
): Promise<PeerSample> {
  const db = await freshDatabase(admin);
  try {
    const extra = ['--n', String(opts.n), '--concurrency', String(opts.concurrency)];
    if (w.peer !== 'engine' && opts.settleMs !== undefined) extra.push('--settle-ms', String(opts.settleMs));
    const child = spawn(process.execPath, runnerArgs(w, engineJs, db.url, extra), {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-8000)));
    const timer = setTimeout(() => child.kill('SIGKILL'), 300_000);
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    clearTimeout(timer);
    const last = stdout.trim().split('\n').pop() ?? '';
    if (code !== 0 || !last.startsWith('{')) {
      throw new Error(`${w.key} exited ${code}:\n${stderr.slice(-2000)}\n${stdout.slice(-500)}`);
    }
    return JSON.parse(last) as PeerSample;
  } finally {
    await db.drop();
  }
}

/** A runner in block mode on a fresh database of its own, booted and warmed up. */
export interface BlockPeer {
  w: PeerWorkload;
  runner: BlockRunner;
  drop: () => Promise<void>;
}

export async function startBlocks(
  admin: string,
  engineJs: string,
  w: PeerWorkload,
  opts: { concurrency: number; warmup: number },
): Promise<BlockPeer> {
  const db = await freshDatabase(admin);
  try {
    const extra = ['--concurrency', String(opts.concurrency), '--warmup', String(opts.warmup), '--serve'];
    if (w.peer !== 'engine') extra.push('--settle-ms', '0', '--timeout-s', '3600');
    const runner = await BlockRunner.start(w.key, runnerArgs(w, engineJs, db.url, extra));
    return { w, runner, drop: db.drop };
  } catch (err) {
    await db.drop();
    throw err;
  }
}

/** Ends a block runner (its closing line) and drops its database. */
export async function stopBlocks(p: BlockPeer): Promise<Record<string, any>> {
  try {
    return await p.runner.end();
  } catch (err) {
    log(`${p.w.key}: ${(err as Error).message}`);
    return {};
  } finally {
    p.runner.kill();
    await p.drop();
  }
}
