import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { cli } from '../../src/cli/main';
import { compiledEntry } from '../helpers/compiled';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';
import { FleetProcess, startProcess, startVendor, Vendor } from './fleet';
import { previousRelease, PREVIOUS_RELEASE } from './previous-release';
import {
  claimedFromTo,
  claimsPerRun,
  crawlOrder,
  EFFECTS_TABLE,
  sleepLateness,
  stepsAfterCommit,
} from './upgrade-checks';
import type { ApiAnswer, UpgradeInput } from './upgrade-app';

const ROOT = path.join(__dirname, '..', '..');
const APP = 'test/upgrade/upgrade-app.ts';
const OLD = PREVIOUS_RELEASE.version;

const times = (n: number, f: (i: number) => UpgradeInput) => Array.from({ length: n }, (_, i) => f(i));
function value(a: ApiAnswer): string {
  if (!a.ok) throw new Error(`API call failed: ${a.code} ${a.message}`);
  return a.value as string;
}

/**
 * docs/UPGRADING.md, done as it says, with runs in flight: the previous release's workers and API
 * process (separate OS processes, the release built from its commit in git) hold runs in every state it
 * has (finished, sleeping, waiting for a signal, mid-step with an intra-step cursor, a charge in flight
 * at a vendor that does not deduplicate); this release's `migrate` runs under them; the old API process
 * is restarted as the docs say (its statements returning ai_runs.* fail with 0A000 until then); the
 * workers are rolled one at a time (a SIGTERM, then a SIGKILL of the worker with a charge in flight),
 * new workers taking crawls the old ones left mid-step; then both new workers stop (a SIGKILL, a
 * SIGTERM) and a previous-release worker takes back what they touched, sleeping runs included; then the
 * roll ends and the signals are sent. Checked: every run succeeds, each charge once, no step after its
 * commit, crawl items resumed where their progress committed, sleeps parked under the previous release
 * on time, what a handed-back sleep does (slept again), and this release's `replay` of every run.
 * Children and schedules are not in it: the previous release has neither.
 */
describe(`upgrading from ${OLD} with runs in flight`, () => {
  let db: TestDatabase;
  let vendor: Vendor;
  const fleet: FleetProcess[] = [];

  afterAll(async () => {
    await Promise.all(fleet.map((p) => p.stop('SIGKILL')));
    await vendor?.close();
    await db?.drop();
  });

  it('migrates under the old fleet, rolls it, hands runs back and forth: every run once, on time, replayable', async () => {
    const old = previousRelease([APP]);
    const js = { old: old.entry(APP), new: compiledEntry(path.join(ROOT, APP)) };
    db = await createTestDatabase('upgrade');
    await old.load('dist/src/store/run-migrations').runDurableMigrations({ type: 'postgres', url: db.url });
    await db.query(EFFECTS_TABLE);
    vendor = await startVendor();
    // The previous release's workers check their replays too (test/replay-check.setup.ts), into a file of
    // their own: what they find in runs this release's workers touched is asserted below.
    const oldReplayCheck = path.join(mkdtempSync(path.join(tmpdir(), 'upgrade-')), 'old-replay-check.jsonl');
    const spawn = (name: string, release: 'old' | 'new', env: Record<string, string> = {}) => {
      const label = release === 'old' ? OLD : 'new';
      const p = startProcess(name, js[release], {
        DB_URL: db.url,
        TARGET_URL: vendor.url,
        RELEASE: label,
        ...(release === 'old' ? { DURABLE_REPLAY_CHECK: oldReplayCheck } : {}),
        ...env,
      });
      fleet.push(p);
      return p;
    };
    // Old workers have room for 6 runs: the runs of two that go do not all fit in the third. New ones
    // have room for all, so a sleep that comes due finds one free (its lateness is the engine's, not a queue's).
    // New workers (and the API processes from the restart on) know kind upgrade-agent-b too.
    const worker = (release: 'old' | 'new', i: number, env: Record<string, string> = {}) =>
      spawn(`${release}-${i}`, release, {
        WORKER_ID: `${release}-${i}`,
        CONCURRENCY: release === 'old' ? '6' : '40',
        ...(release === 'new' ? { EXTRA_KIND: '1' } : {}),
        ...env,
      });
    const started = Date.now();
    const phases: string[] = [];
    const mark = (phase: string) => phases.push(`${phase} ${((Date.now() - started) / 1000).toFixed(1)} s`);
    const olds = [1, 2, 3].map((i) => worker('old', i));
    let api = spawn('old-api', 'old', { ROLE: 'api' });
    await Promise.all([...olds, api].map((p) => p.ready));

    // Runs in every state the previous release has, at the time of the migration.
    const plan: Record<string, UpgradeInput[]> = {
      done: times(4, () => ({ items: 2, itemMs: 20, sleepMs: 200, wait: false })),
      sleeping: times(6, (i) => ({ items: 2, itemMs: 20, sleepMs: 22_000 + 500 * i, wait: false })),
      waiting: times(6, () => ({ items: 2, itemMs: 20, sleepMs: 100, wait: true })),
      // 4 a worker: when two old workers go, the third has no room for all of theirs; new ones take the rest.
      crawling: times(12, () => ({ items: 70, itemMs: 200, sleepMs: 100, wait: false })),
      inDoubt: times(2, () => ({ items: 1, itemMs: 20, sleepMs: 100, wait: false, hold: true })),
    };
    const ids: Record<string, string[]> = {};
    for (const [group, inputs] of Object.entries(plan))
      ids[group] = await Promise.all(
        inputs.map(async (input) => value(await api.call({ op: 'start', input }))),
      );
    const states = async () => {
      const rows = await db.query<{
        id: string;
        status: string;
        item: number | null;
        pending: boolean;
        woke: boolean;
      }>(
        `select r.id, r.status, (r.cursor->>'item')::int as item,
                exists (select 1 from ai_commands c where c.run_id = r.id and c.status = 'pending') as pending,
                exists (select 1 from upgrade_effects e where e.run_id = r.id and e.step = 'woke') as woke
           from ai_runs r`,
      );
      const of = new Map(rows.map((r) => [r.id, r]));
      const count = (group: string, f: (r: (typeof rows)[number]) => boolean) =>
        ids[group].filter((id) => f(of.get(id)!)).length;
      return {
        done: count('done', (r) => r.status === 'succeeded'),
        sleeping: count('sleeping', (r) => r.status === 'waiting' && !r.woke),
        waiting: count('waiting', (r) => r.status === 'waiting' && r.woke),
        crawling: count('crawling', (r) => r.status === 'running' && (r.item ?? 0) > 0),
        inDoubt: count('inDoubt', (r) => r.status === 'running' && r.pending),
      };
    };
    const expected = { done: 4, sleeping: 6, waiting: 6, crawling: 12, inDoubt: 2 };
    await waitFor(
      async () => JSON.stringify(await states()) === JSON.stringify(expected),
      30_000,
      'runs in every state',
    );
    // The API process has its named statements prepared on its pooled connections (as a busy one has).
    await Promise.all(
      ids.done.map(async (id) => expect(value(await api.call({ op: 'get', runId: id }))).toBe('succeeded')),
    );

    mark('states');
    // 1. Migrate with this release's CLI while the old workers run.
    const out: string[] = [];
    const t0 = Date.now();
    expect(
      await cli(
        ['migrate', '--url', db.url],
        {},
        (l) => out.push(l),
        (l) => out.push(l),
      ),
    ).toBe(0);
    const migrateMs = Date.now() - t0;
    expect(out.join('\n')).toMatch(/applied .*PartitionedEvents1767000000000/);
    const [{ migrated }] = await db.query<{ migrated: Date }>('select now() as migrated');

    mark('migrated');
    // 2. The old API process: its statements returning ai_runs.* no longer run (0A000); restarted, it works.
    const gets = await Promise.all(ids.done.map((id) => api.call({ op: 'get', runId: id })));
    const starts = await Promise.all(
      times(2, () => ({ items: 1, itemMs: 20, sleepMs: 100, wait: false })).map((input) =>
        api.call({ op: 'start', input }),
      ),
    );
    const refused = [...gets, ...starts].filter((a) => !a.ok);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused)
      expect(r).toMatchObject({ code: '0A000', message: 'cached plan must not change result type' });
    await api.stop('SIGTERM');
    api = spawn('old-api-2', 'old', { ROLE: 'api', EXTRA_KIND: '1' });
    await api.ready;
    ids.late = starts.filter((a) => a.ok).map(value);
    ids.late.push(
      value(await api.call({ op: 'start', input: { items: 3, itemMs: 50, sleepMs: 300, wait: false } })),
    );
    expect(value(await api.call({ op: 'get', runId: ids.done[0] }))).toBe('succeeded');

    mark('api restarted');
    // 3. Roll: SIGTERM a worker without a charge in flight, SIGKILL one with a charge in flight.
    const holders = (
      await db.query<{ worker_id: string }>(
        `select distinct r.worker_id from ai_runs r join ai_commands c on c.run_id = r.id
          where c.status = 'pending' and r.status = 'running'`,
      )
    ).map((r) => r.worker_id);
    const drained = olds.find((w) => !holders.includes(w.name))!;
    const killed = olds.find((w) => holders.includes(w.name))!;
    const kept = olds.find((w) => w !== drained && w !== killed)!;
    await drained.stop('SIGTERM');
    const n1 = worker('new', 1);
    await n1.ready;
    await killed.stop('SIGKILL');
    const n2 = worker('new', 2);
    await n2.ready;
    // A mixed fleet. Runs of kind upgrade-agent-b, which only the new workers have: they run their steps
    // and park in their sleep, its due time recorded as this release records it.
    ids.mixed = await Promise.all(
      times(4, () => ({ items: 2, itemMs: 20, sleepMs: 5000, wait: false })).map(async (input) =>
        value(await api.call({ op: 'start', input, kind: 'upgrade-agent-b' })),
      ),
    );
    // And two that wait for their signal (their sleep done), parked by the new workers.
    ids.mixedWait = await Promise.all(
      times(2, () => ({ items: 2, itemMs: 20, sleepMs: 100, wait: true })).map(async (input) =>
        value(await api.call({ op: 'start', input, kind: 'upgrade-agent-b' })),
      ),
    );
    const parkedByNew = async () =>
      (
        await db.query(
          `select 1 from ai_runs r where r.id = any($1) and r.status = 'waiting'
              and exists (select 1 from ai_checkpoints c where c.run_id = r.id and c.step_name = '$due')
              and (r.id <> all($2) or exists (select 1 from upgrade_effects e where e.run_id = r.id and e.step = 'woke'))`,
          [[...ids.mixed, ...ids.mixedWait], ids.mixedWait],
        )
      ).length;
    await waitFor(async () => (await parkedByNew()) === 6, 20_000, 'new workers parking runs');

    mark('mixed');
    // 4. Hand back: both new workers stop (a SIGKILL, a SIGTERM), and a worker of the previous release that
    // has kind upgrade-agent-b starts (a roll that goes back): the old workers take what the new ones
    // touched, the crawls they held, the sleeping runs when they come due, the waiting ones when signalled
    // (through the 0.2.0 API process).
    await Promise.all([n1.stop('SIGKILL'), n2.stop('SIGTERM')]);
    const back = worker('old', 4, { EXTRA_KIND: '1' });
    await back.ready;
    for (const id of ids.mixedWait)
      expect((await api.call({ op: 'signal', runId: id, payload: { ok: true } })).ok).toBe(true);
    await waitFor(
      async () => {
        const back = await claimedFromTo(db, 'new-', 'old-');
        return [...ids.mixed, ...ids.mixedWait].every((id) => back.includes(id));
      },
      30_000,
      'sleeping and signalled runs handed back to an old worker',
    );

    mark('handed back');
    // 5. The roll ends: new workers, the old one drained, the API process replaced; then the signals.
    const n3 = worker('new', 3);
    const n4 = worker('new', 4);
    await Promise.all([n3.ready, n4.ready]);
    await Promise.all([kept.stop('SIGTERM'), back.stop('SIGTERM')]);
    await api.stop('SIGTERM');
    api = spawn('new-api', 'new', { ROLE: 'api', EXTRA_KIND: '1' });
    await api.ready;
    for (const id of ids.waiting)
      expect((await api.call({ op: 'signal', runId: id, payload: { ok: true } })).ok).toBe(true);
    mark('rolled');
    const all = Object.values(ids).flat();
    await waitFor(
      async () =>
        (await db.query(`select 1 from ai_runs where id = any($1) and status = 'succeeded'`, [all]))
          .length === all.length,
      90_000,
      'every run succeeded',
    );

    // Every run succeeded, each charge applied once (the vendor does not deduplicate): the two in flight at
    // the SIGKILL were looked up, not sent again.
    const charges = vendor.effects();
    expect(Object.keys(charges)).toHaveLength(all.length);
    expect(Object.entries(charges).filter(([, n]) => n !== 1)).toEqual([]);
    // No step ran after its commit; a crawl item ran again only where an interruption caught it.
    expect(await stepsAfterCommit(db)).toEqual([]);
    const crawl = await crawlOrder(db);
    expect(crawl.broken).toEqual([]);
    const claims = await claimsPerRun(db);
    for (const [run, n] of crawl.repeats) expect(n).toBeLessThanOrEqual((claims.get(run) ?? 1) - 1);
    // Old workers ran steps on the migrated schema; new ones went on with cursors the old ones saved.
    const ranAfter = await db.query(`select 1 from upgrade_effects where release = $1 and at > $2`, [
      OLD,
      migrated,
    ]);
    expect(ranAfter.length).toBeGreaterThan(0);
    const continued = await db.query(
      `select run_id from upgrade_effects where step = 'crawl' group by run_id
        having bool_or(release = $1) and min(item) filter (where release = 'new') > 0`,
      [OLD],
    );
    expect(continued.length).toBeGreaterThan(0);
    // Sleeps parked by the previous release woke on time; none woke early.
    const late = await sleepLateness(db);
    expect(late).toHaveLength(all.length);
    expect(Math.min(...late.map((l) => l.late))).toBeGreaterThanOrEqual(0);
    const sleepers = late.filter((l) => ids.sleeping.includes(l.runId)).map((l) => l.late);
    expect(Math.max(...sleepers)).toBeLessThan(2);

    // Handed back (docs/UPGRADING.md, "Handing runs back"): every run this release's workers touched and a
    // 0.2.0 worker took went on and ended, nothing ran twice (above), with one difference: a sleep this
    // release started (its due time in a `$due` record) and a 0.2.0 worker resumed is slept again in full
    // (0.2.0 parks it anew for its length), and 0.2.0's own replay check calls that record never asked for.
    const handedBack = await claimedFromTo(db, 'new-', 'old-');
    expect(handedBack).toEqual(expect.arrayContaining([...ids.mixed, ...ids.mixedWait]));
    // The waits parked by this release, signalled through a 0.2.0 API process, were delivered to 0.2.0.
    const outputs = await db.query<{ output: { approval: unknown } }>(
      `select output from ai_runs where id = any($1)`,
      [ids.mixedWait],
    );
    expect(outputs.map((o) => o.output.approval)).toEqual([{ ok: true }, { ok: true }]);
    const slept = await db.query<{ run_id: string; again: number }>(
      `select d.run_id, extract(epoch from (s.output #>> '{}')::timestamptz - (d.output #>> '{}')::timestamptz)::float8
              as again
         from ai_checkpoints d join ai_checkpoints s on s.run_id = d.run_id and s.step_name = '$sleep'
        where d.step_name = '$due' and d.run_id = any($1)`,
      [ids.mixed],
    );
    expect(slept).toHaveLength(ids.mixed.length);
    for (const r of slept) expect(r.again).toBeGreaterThanOrEqual(5); // the mixed runs sleep 5 s
    const oldChecks = existsSync(oldReplayCheck)
      ? readFileSync(oldReplayCheck, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as { runId: string; problems: string[] })
      : [];
    expect(oldChecks.map((c) => c.runId)).toEqual(expect.arrayContaining(ids.mixed));
    for (const c of oldChecks) {
      expect(handedBack).toContain(c.runId);
      expect(c.problems).toEqual([
        expect.stringMatching(/^the replay never asked for \$due at #-\d+ of the record$/),
      ]);
    }

    // The replay check: this release's CLI replays every run against this release's code.
    process.env.DB_URL = db.url;
    process.env.EXTRA_KIND = '1';
    const replayed: string[] = [];
    const app = `${path.join(ROOT, APP)}#UpgradeAppModule`;
    for (const kind of ['upgrade-agent', 'upgrade-agent-b'])
      expect(
        await cli(
          ['replay', '--app', app, '--kind', kind, '--limit', '1000'],
          process.env,
          (l) => replayed.push(l),
          (l) => replayed.push(l),
        ),
      ).toBe(0);
    expect(replayed.filter((l) => l.startsWith('FAIL'))).toEqual([]);
    expect(replayed.filter((l) => l.startsWith('ok '))).toHaveLength(all.length);
    console.log(
      `upgrade from ${OLD}: ${all.length} runs, migrate ${migrateMs} ms, old API refused ${refused.length}/${gets.length + starts.length} calls (0A000), ` +
        `${handedBack.length} runs handed back new -> old, sleepers late max ${Math.max(...sleepers).toFixed(2)} s, ` +
        `${oldChecks.length} flagged by 0.2.0's replay check, ` +
        `crawl repeats ${[...crawl.repeats.values()].reduce((a, b) => a + b, 0)}; ${phases.join(', ')}`,
    );
  }, 240_000);
});
