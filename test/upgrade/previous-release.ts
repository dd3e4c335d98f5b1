import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';

const ROOT = path.join(__dirname, '..', '..');

/**
 * The release this one must upgrade from with runs in flight (docs/UPGRADING.md): its version and the
 * commit it was cut at. When the next release is cut, this becomes that release's commit (and
 * test/upgrade/seed.ts the data of its schema).
 */
export const PREVIOUS_RELEASE = { version: '0.2.0', commit: 'c9b2b705c2481c47c0fc1a7eab2a930692fcfee5' };

/** The previous release, built: its sources and its compiled JavaScript. */
export interface BuiltRelease {
  version: string;
  /** The release's tree (`git archive` of its commit), with this checkout's node_modules linked in. */
  root: string;
  /** `require` a module of its build: `load('dist/src/store/run-migrations')`. */
  load<T = any>(rel: string): T;
  /** The compiled JavaScript of `entry` (a file of this checkout) built against the release's sources. */
  entry(entry: string): string;
}

/**
 * The previous release's sources (from git: `git archive` of its commit) compiled with this checkout's
 * TypeScript into `.tmp/release-<commit>-<key>/` (emit only, as test/helpers/compiled.ts does), with
 * `fixtures` (files of this checkout, e.g. test/upgrade/upgrade-app.ts) copied into the same place of
 * its tree first, so that their `../../src` is the release's library. It runs on this checkout's
 * node_modules: the release's dependencies are a subset of today's at the same versions (checked here,
 * so a drift fails instead of testing another build). The key hashes the fixtures: an edit rebuilds.
 * Needs the commit in the clone (a full clone; a shallow one fails with what to do).
 */
export function previousRelease(fixtures: string[] = []): BuiltRelease {
  const { commit, version } = PREVIOUS_RELEASE;
  const key = createHash('sha1')
    .update(fixtures.map((f) => `${f}\n${readFileSync(path.join(ROOT, f), 'utf8')}`).join('\n'))
    .digest('hex')
    .slice(0, 10);
  const dir = path.join(ROOT, '.tmp', `release-${commit.slice(0, 12)}-${key}`);
  if (!existsSync(path.join(dir, 'built'))) build(dir, fixtures);
  return {
    version,
    root: dir,
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    load: (rel) => require(path.join(dir, rel)),
    entry: (entry) => path.join(dir, 'dist', entry.replace(/\.ts$/, '.js')),
  };
}

function git(args: string[]): Buffer {
  return execFileSync('git', args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 1 << 30 });
}

function build(dir: string, fixtures: string[]): void {
  const { commit, version } = PREVIOUS_RELEASE;
  try {
    git(['cat-file', '-e', `${commit}^{commit}`]);
  } catch {
    throw new Error(
      `commit ${commit} (release ${version}) is not in this clone: the upgrade tests build it from git. ` +
        'Clone with full history (a shallow clone: git fetch --unshallow).',
    );
  }
  sameDependencies(JSON.parse(git(['show', `${commit}:package-lock.json`]).toString()));
  const work = `${dir}.${process.pid}.${Date.now()}`;
  mkdirSync(work, { recursive: true });
  const tar = path.join(work, '..', `${path.basename(work)}.tar`);
  execFileSync('git', ['archive', '--format=tar', '-o', tar, commit, 'src', 'migrations', 'tsconfig.json'], {
    cwd: ROOT,
  });
  execFileSync('tar', ['-xf', tar, '-C', work]);
  rmSync(tar);
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(work, 'node_modules'), 'dir');
  for (const f of fixtures) {
    mkdirSync(path.dirname(path.join(work, f)), { recursive: true });
    copyFileSync(path.join(ROOT, f), path.join(work, f));
  }
  execFileSync(
    process.execPath,
    [
      require.resolve('typescript/bin/tsc'),
      '--project',
      path.join(work, 'tsconfig.json'),
      '--noCheck',
      '--declaration',
      'false',
      '--sourceMap',
      'false',
      '--outDir',
      path.join(work, 'dist'),
      '--rootDir',
      work,
      '--types',
      'node',
    ],
    { cwd: work, stdio: ['ignore', 'inherit', 'inherit'] },
  );
  // Only the library and the fixtures are compiled: the release's own tests and benches are not here.
  writeFileSync(path.join(work, 'built'), `${commit}\n`);
  try {
    renameSync(work, dir);
  } catch {
    rmSync(work, { recursive: true, force: true }); // another process got there first
  }
  // Builds of an earlier previous release, left more than an hour ago, are of no use any more.
  const tmp = path.dirname(dir);
  for (const d of readdirSync(tmp)) {
    const p = path.join(tmp, d);
    const other = d.startsWith('release-') && !d.startsWith(`release-${commit.slice(0, 12)}-`);
    if (other && Date.now() - statSync(p).mtimeMs > 3_600_000) rmSync(p, { recursive: true, force: true });
  }
}

/**
 * Every package the release's lock installs at top level is installed here at the same version: the
 * release then runs as it was tested. A difference fails with the package, so that the test is changed
 * on purpose (an install of the release's own tree) rather than run on other code.
 */
function sameDependencies(lock: { packages: Record<string, { version?: string }> }): void {
  const ours = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as typeof lock;
  const differ = Object.entries(lock.packages)
    .filter(([k]) => k.startsWith('node_modules/') && k.split('node_modules/').length === 2)
    .filter(([k, v]) => ours.packages[k]?.version !== v.version)
    .map(([k, v]) => `${k.slice('node_modules/'.length)} ${v.version} (here ${ours.packages[k]?.version})`);
  if (differ.length)
    throw new Error(`${PREVIOUS_RELEASE.version} was locked to other versions: ${differ.join(', ')}`);
}
