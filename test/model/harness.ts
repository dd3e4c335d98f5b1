/**
 * Runs one case: a fresh database, three worker apps (timers off; this harness ticks, heartbeats and
 * sweeps), the case's runs, its outside actions at their moments and its faults at pause points,
 * driven until every run has settled; then the invariant checker.
 */
import { INestApplication } from '@nestjs/common';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { RunRepository, RunView } from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { Reconciler } from '../../src/maintenance/reconciler.service';
import { exportRunHistory, setPausePointHook } from '../../src/testing';
import { bootApp } from '../helpers/app';
import { createTestSchema, TestDatabase, TestSchema } from '../helpers/database';
import { applyAction, decide, keyedOp, releaseHolder } from './actions';
import { FaultPlan, ModelWorker } from './faults';
import { checkInvariants } from './invariants';
import type { Case, ScheduledAction } from './program';
import {
  HoldingModelWorkflow,
  LimitedModelWorkflow,
  MODEL_BUDGET,
  MODEL_BUDGET_LIMITS,
  MODEL_KIND,
  MODEL_HOLD_KIND,
  MODEL_LIMITED_KIND,
  MODEL_PROVIDERS,
} from './workflow';
import { inNewWorld, world as currentWorld, World } from './world';
import { LostSuffixRig, lostSuffixCoverage, startLostSuffixRig } from './lost-suffix';
import { CURRENT_TIMELINE } from '../../src/store/sql/timeline.sql';
import { RULES, ruleOf } from './grammar';
import { ScheduledStart } from './schedule-case';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms).unref());
const TERMINAL = ['succeeded', 'failed', 'cancelled', 'dead_lettered'];
const CASE_TIMEOUT_MS = 20_000;
/** The workers' lease: this harness renews it every round (a few ms apart on a machine that is not starved). */
const LEASE_TTL_MS = 400;

interface Booted extends ModelWorker {
  app: INestApplication;
}

export interface CaseResult {
  violations: string[];
  runs: RunView[];
  ms: number;
  /** Grammar rules of this case: entered live (`ran`), and replayed by a later epoch (`replayed`). */
  coverage: Map<string, { ran: number; replayed: number }>;
}

/** Per rule of the case's programs: entered by one epoch, entered again by a later one (a replay). */
function coverageOf(c: Case, runIds: string[], world: World): CaseResult['coverage'] {
  const out: CaseResult['coverage'] = new Map(RULES.map((r) => [r, { ran: 0, replayed: 0 }]));
  c.programs.forEach((p, r) => {
    for (const op of p.ops) {
      const epochs = new Set(
        world.observations.filter((o) => o.runId === runIds[r] && o.op === `${op.id}@`).map((o) => o.epoch),
      );
      const rule = out.get(ruleOf(op)) ?? { ran: 0, replayed: 0 };
      if (epochs.size) rule.ran++;
      if (epochs.size > 1) rule.replayed++;
      out.set(ruleOf(op), rule);
    }
    const cleanups = new Set(
      world.observations.filter((o) => o.runId === runIds[r] && o.op === 'cleanup@').map((o) => o.epoch),
    );
    const rule = out.get('cleanup after a cancel (onCancel)')!;
    if (cleanups.size) rule.ran++;
    if (cleanups.size > 1) rule.replayed++;
  });
  return out;
}

let bootCount = 0;

const kindOf = (c: Case) => (c.limited ? (c.hold ? MODEL_HOLD_KIND : MODEL_LIMITED_KIND) : MODEL_KIND);

/** A worker; `limited`: it also runs the kind with concurrency limits (its claims take slots). */
async function bootWorker(db: TestSchema, c: Case): Promise<Booted> {
  const limited = !!c.limited;
  const id = `model-w${++bootCount}`;
  const limitedKinds = [LimitedModelWorkflow, HoldingModelWorkflow];
  const app = await bootApp(db.url, limited ? [...MODEL_PROVIDERS, ...limitedKinds] : MODEL_PROVIDERS, {
    database: { url: db.url, schema: db.schema, poolSize: 4 },
    worker: {
      concurrency: 4,
      leaseTtlMs: LEASE_TTL_MS,
      heartbeatMs: 100,
      drainTimeoutMs: 0,
      workerId: id,
      fencedTransport: c.fencedTransport !== false,
    },
    reconciler: { backoffBaseMs: 5, backoffMaxMs: 40 },
    defaultRetry: { initialDelayMs: 5, maxDelayMs: 20 },
    budgets: { [MODEL_BUDGET]: MODEL_BUDGET_LIMITS },
    // The schedule case makes a schedule that fires every second at run time.
    limits: { minScheduleIntervalMs: 1000 },
  });
  return { id, app, state: 'live', claims: new Set() };
}

/**
 * One case, on a schema of its own in `host` (the harness process's database): its workers, its runs,
 * its checks, then the fault-free twin; the schema is dropped at the end.
 */
export function runCase(generated: Case, host: TestDatabase): Promise<CaseResult> {
  return inNewWorld((world) => runCaseIn(world, generated, host));
}

async function runCaseIn(world: World, generated: Case, host: TestDatabase): Promise<CaseResult> {
  const t0 = Date.now();
  // A copy: a scheduled case adds a program (and its signals) for each run a tick starts.
  const c: Case = { ...generated, programs: [...generated.programs], actions: [...generated.actions] };
  // A case with a real lost WAL suffix runs on a primary and a standby of its own.
  const rig: LostSuffixRig | null = c.faults.some((f) => f.kind === 'lost-suffix')
    ? await startLostSuffixRig()
    : null;
  const db = rig?.db ?? createTestSchema(host, 'case');
  // Through the case's own connection: the rig's switch follows the promoted standby.
  const timelineNow = async () => (await db.query(`select ${CURRENT_TIMELINE} as t`))[0].t as number;
  let timeline = 0; // the server's WAL timeline (read once the schema is there)
  let eventsLost = 0;
  const workers: Booted[] = [];
  const runIds: string[] = [];
  const applied = new Set<ScheduledAction>();
  let released = 0;
  const boots: Promise<void>[] = [];
  // A worker booted while the primary is gone (a crash fault's replacement) tries again once it is back.
  const boot = async (): Promise<Booted> => {
    for (let tries = 1; ; tries++) {
      try {
        return await bootWorker(db, c);
      } catch (err) {
        if (!rig || tries >= 20) throw err;
        await plan.outage;
        await sleep(100);
      }
    }
  };
  const addWorker = () => {
    const b = boot().then((w) => {
      workers.push(w);
      plan.workers.set(w.id, w);
    });
    boots.push(b);
    return b;
  };
  const live = () => workers.filter((w) => w.state === 'live');
  const apply = async (a: ScheduledAction) => {
    applied.add(a);
    // The outside world acts on the primary that answers: not on one about to lose the action.
    if (plan.outage) await plan.outage;
    const app = live()[0]?.app ?? workers[0].app;
    if (a.action.a === 'release') {
      const others = [...live(), ...workers.filter((w) => w.state !== 'live')].map((w) => w.app);
      if (await releaseHolder(others, runIds[a.run], timeline, (tag) => plan.faulted.add(tag))) released++;
    } else await applyAction(app, runIds[a.run], c.programs[a.run], a.action);
  };
  const plan = new FaultPlan(
    c.faults,
    () => runIds,
    async (i, ms) => {
      await sleep(ms);
      // Once: an action already applied at rest (its hold had not fired yet) is not applied again when
      // the hold fires late, after the drive loop has seen everything settle.
      for (const a of c.actions)
        if (a.moment.at === 'hold' && a.moment.fault === i && !applied.has(a)) await apply(a);
    },
    () => void addWorker(),
    (w) => {
      const app = (w as Booted).app;
      void app
        .get(DurableWorker)
        .beforeApplicationShutdown()
        .catch(() => undefined);
    },
    async (runId) => {
      await db.query(`update ai_runs set timeline = timeline - 1 where id = $1`, [runId]);
    },
    async (windowMs) => {
      eventsLost = await rig!.fail(windowMs);
      // Every claim made so far was on the old timeline: its work since the fork may be gone.
      for (const w of workers) for (const tag of w.claims) plan.faulted.add(tag);
      timeline = await timelineNow();
      world.lostSuffix = { timeline };
    },
  );
  let result: CaseResult = { violations: [], runs: [], ms: 0, coverage: new Map() };
  try {
    await addWorker();
    timeline = await timelineNow();
    await Promise.all([addWorker(), addWorker()]);
    setPausePointHook(plan.hook);
    world.inBody = plan.inBody;
    const runs = workers[0].app.get(RunRepository);
    const sched = c.scheduled ? new ScheduledStart(c, runIds, db, kindOf(c)) : null;
    if (sched) await sched.begin(workers[0].app, () => live().map((w) => w.app));
    for (const p of c.programs.slice(runIds.length)) runIds.push((await runs.start(kindOf(c), p)).run.id);
    for (const a of c.actions) if (a.moment.at === 'start') await apply(a);
    const stuck = await drive(c, workers, runIds, plan, applied, apply, live, addWorker, sched);
    if (plan.outage) await plan.outage;
    await sched?.settle();
    await Promise.all(boots);
    // Work still in flight (a woken zombie, a held run) lands before the check: wait for every worker
    // that is not crashed, and for the longest hold that fired.
    const alive = workers.filter((w) => w.state !== 'crashed');
    await Promise.all(alive.map((w) => Promise.race([w.app.get(DurableWorker).idle(), sleep(3000)])));
    const held = c.faults.filter((f, i) => plan.fired[i] && f.kind === 'hold').map((f) => f.holdMs);
    if (held.length) await sleep(Math.max(...held) + 100);
    const views = (await Promise.all(runIds.map((id) => runs.get(id)))) as RunView[];
    const violations = [...stuck, ...(await checkInvariants(db, world, c, runIds, plan))];
    if (sched) violations.push(...(await sched.violations()));
    const childIds = (
      await db.query(`select id from ai_runs where parent_id = any($1) order by created_at`, [runIds])
    ).map((r: { id: string }) => r.id);
    violations.push(...replayCheckProblems(runIds, childIds));
    if (violations.length) await dumpFailure(c, runIds, workers[0].app, violations);
    const coverage = coverageOf(c, runIds, world);
    if (c.limited) {
      const { n } = (
        await db.query(
          `select count(*)::int as n from ai_events where event_type = 'run.limited' and run_id = any($1)`,
          [runIds],
        )
      )[0];
      for (const [key, hit] of [
        [`limits: a case of the limited kind${c.hold ? ' (slots held while waiting)' : ''}`, true],
        ['limits: a run held back by a full limit', n > 0],
      ] as const) {
        const x = coverage.get(key) ?? { ran: 0, replayed: 0 };
        if (hit) coverage.set(key, { ran: x.ran + 1, replayed: x.replayed + 1 });
      }
    }
    if (sched) {
      const ticks = c.programs.length - generated.programs.length + 1;
      for (const [key, hit] of [
        [`schedule: a case started by a schedule (overlap ${c.scheduled!.overlap})`, true],
        ['schedule: two ticks fired, two runs', ticks >= 2],
        [
          'schedule: a pod faulted between reading a due schedule and firing it',
          c.faults.some((f, i) => plan.fired[i] && f.where === 'before-write:schedule.fire'),
        ],
      ] as const) {
        const x = coverage.get(key) ?? { ran: 0, replayed: 0 };
        if (hit) coverage.set(key, { ran: x.ran + 1, replayed: x.replayed + 1 });
      }
    }
    // Model budgets: a call of the case's model steps parked because the budget's window was full.
    const { waits } = (
      await db.query(
        `select count(*)::int as waits from ai_events where event_type = 'model.budget_wait' and run_id = any($1)`,
        [runIds],
      )
    )[0];
    if (waits > 0) {
      const x = coverage.get('budget: a model call parked over budget') ?? { ran: 0, replayed: 0 };
      coverage.set('budget: a model call parked over budget', { ran: x.ran + 1, replayed: x.replayed + 1 });
    }
    // Faults that fired, by kind (a drain counts only when the call it held was in flight).
    c.faults.forEach((f, i) => {
      if (!plan.fired[i]) return;
      const inBody = f.where.startsWith('in-body') ? ' inside a command body, before its request' : '';
      const key = `fault: ${f.kind}${f.kind === 'drain' ? ' with a call in flight' : inBody}`;
      const x = coverage.get(key) ?? { ran: 0, replayed: 0 };
      coverage.set(key, { ran: x.ran + 1, replayed: x.replayed + 1 });
    });
    const keyed = keyedOp(c.programs, runIds);
    for (const [key, n] of await lostSuffixCoverage(world, db, runIds, eventsLost, keyed)) {
      const x = coverage.get(key) ?? { ran: 0, replayed: 0 };
      coverage.set(key, { ran: x.ran + n, replayed: x.replayed + n });
    }
    if (released) {
      const x = coverage.get('action: a live worker released') ?? { ran: 0, replayed: 0 };
      coverage.set('action: a live worker released', {
        ran: x.ran + released,
        replayed: x.replayed + released,
      });
    }
    if (plan.starved) {
      const x = coverage.get('fault: harness starved (no renewal for most of a lease)') ?? {
        ran: 0,
        replayed: 0,
      };
      coverage.set('fault: harness starved (no renewal for most of a lease)', {
        ran: x.ran + 1,
        replayed: x.replayed + 1,
      });
    }
    // The same programs again, with no fault and every signal at once: each run must end as it did.
    setPausePointHook(null);
    world.inBody = null;
    plan.releaseAll();
    if (!stuck.length) {
      // On a worker of its own: the case's workers may still hold what its faults froze.
      const fresh = await bootWorker(db, c);
      workers.push(fresh);
      violations.push(...(await againWithoutFaults(c, views, fresh, runIds)));
    }
    result = { violations, runs: views, ms: Date.now() - t0, coverage };
  } finally {
    setPausePointHook(null);
    world.inBody = null;
    plan.releaseAll();
    await plan.outage?.catch(() => undefined);
    await Promise.all(workers.map((w) => Promise.race([w.app.close(), sleep(2000)]).catch(() => undefined)));
    await dropLater(db);
  }
  return result;
}

/**
 * A failing case, whole, for the post-mortem of one that does not fail again: the case, its
 * violations, each run's stored history and its event trail, one JSON line appended to
 * `DURABLE_MODEL_FAILURES` (default: durable-model-failures.jsonl in the temp folder).
 */
async function dumpFailure(c: Case, runIds: string[], app: INestApplication, violations: string[]) {
  const file = process.env.DURABLE_MODEL_FAILURES ?? path.join(tmpdir(), 'durable-model-failures.jsonl');
  const runs = app.get(RunRepository);
  const histories = await Promise.all(runIds.map((id) => exportRunHistory(app, id).catch((e) => String(e))));
  const trails = await Promise.all(runIds.map((id) => runs.events(id).catch((e) => String(e))));
  appendFileSync(
    file,
    `${JSON.stringify({ at: new Date().toISOString(), case: c, violations, histories, trails })}\n`,
  );
  console.log(`[model] failing case written to ${file}`);
}

/** Replay checks of this case's runs that failed (the workers check each run after each attempt). */
function replayCheckProblems(runIds: string[], childIds: string[]): string[] {
  const file = process.env.DURABLE_REPLAY_CHECK;
  if (!file || !existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { runId: string; problems: string[] })
    .filter((r) => runIds.includes(r.runId) || childIds.includes(r.runId))
    .map((r) => {
      const name = runIds.includes(r.runId) ? `run#${runIds.indexOf(r.runId)}` : `child ${r.runId}`;
      return `${name} did not replay: ${r.problems.join('; ')}`;
    });
}

/**
 * The fault-free twin of a case: its programs started again on the same workers (no pause hook, every
 * signal at start, the operator deciding as before), driven to rest. A run whose case had no cancel or
 * retry must end as its twin does: same status, same error code (a fault may cost time, never change
 * an outcome). Dead-lettered runs are left out (attempts spent by crashes are the faults' doing).
 */
async function againWithoutFaults(c: Case, views: RunView[], w: Booted, runIds: string[]): Promise<string[]> {
  const runs = w.app.get(RunRepository);
  const twins: string[] = [];
  for (const p of c.programs) twins.push((await runs.start(kindOf(c), p)).run.id);
  for (const a of c.actions)
    if (a.action.a === 'signal') await applyAction(w.app, twins[a.run], c.programs[a.run], a.action);
  const worker = w.app.get(DurableWorker);
  const deadline = Date.now() + CASE_TIMEOUT_MS;
  while (Date.now() < deadline) {
    await worker.heartbeat().catch(() => undefined);
    await w.app
      .get(Reconciler)
      .sweep()
      .catch(() => undefined);
    await worker.tick();
    await sleep(15);
    if (!(await settled(w.app, twins, true))) continue;
    let decided = false;
    for (let r = 0; r < twins.length; r++)
      decided = (await decide(w.app, twins[r], c.programs[r])) || decided;
    if (!decided && (await settled(w.app, twins))) break;
  }
  await worker.idle();
  const out: string[] = [];
  for (let r = 0; r < twins.length; r++) {
    const touched = c.actions.some((a) => a.run === r && (a.action.a === 'cancel' || a.action.a === 'retry'));
    const faulted = views[r];
    if (touched || !faulted || faulted.status === 'dead_lettered') continue;
    const twin = (await runs.get(twins[r]))!;
    const code = (v: RunView) => (v.error as { code?: string } | null)?.code ?? '';
    if (twin.status !== faulted.status || code(twin) !== code(faulted))
      out.push(
        `run#${r} ended ${faulted.status} ${code(faulted)} (${runIds[r]}), its fault-free twin ${twin.status} ${code(twin)}` +
          (twin.status === 'waiting'
            ? ` (${twin.id}: ${twin.parkedReason}, due ${twin.availableAt.toISOString()})`
            : ''),
      );
  }
  return out;
}

/** The database goes once the apps' pools are closed (with force, for a crashed app's leftovers). */
async function dropLater(db: TestDatabase): Promise<void> {
  await db.drop().catch(() => undefined);
}

async function drive(
  c: Case,
  workers: Booted[],
  runIds: string[],
  plan: FaultPlan,
  applied: Set<ScheduledAction>,
  apply: (a: ScheduledAction) => Promise<void>,
  live: () => Booted[],
  addWorker: () => Promise<void>,
  sched: ScheduledStart | null,
): Promise<string[]> {
  const deadline = Date.now() + CASE_TIMEOUT_MS;
  const lastBeat = new Map<Booted, number>();
  const outages = c.faults.some((f) => f.kind === 'lost-suffix');
  for (let round = 0; Date.now() < deadline; round++) {
    try {
      if (!live().length) await addWorker();
      const ws = live();
      // The harness renews the leases: when it could not for most of a lease (the machine was starved:
      // another process took the CPU), the leases it should have renewed may lapse with no fault of the
      // case's. That is the environment's fault, counted as one for those workers' claims.
      const now = Date.now();
      for (const w of ws) {
        const last = lastBeat.get(w) ?? now;
        if (now - last > LEASE_TTL_MS * 0.75) {
          for (const tag of w.claims) plan.faulted.add(tag);
          plan.starved++;
        }
      }
      await Promise.all(
        ws.map((w) =>
          w.app
            .get(DurableWorker)
            .heartbeat()
            .then(() => lastBeat.set(w, Date.now()))
            .catch(() => undefined),
        ),
      );
      await ws[0].app
        .get(Reconciler)
        .sweep()
        .catch(() => undefined);
      for (const w of workers)
        if (w.state === 'live' || w.state === 'deaf') void w.app.get(DurableWorker).tick();
      if (sched) {
        sched.fire(ws.map((w) => w.app));
        await sched.adopt();
      }
      for (const a of c.actions)
        if (!applied.has(a) && a.moment.at === 'round' && a.moment.n <= round) await apply(a);
      // The deploy of the code with ctx.patched (claims that begin from now on run it).
      if (c.deployAt !== undefined && c.deployAt !== null && round >= c.deployAt)
        currentWorld.deployed = true;
      await sleep(15);
      if (!(await settled(ws[0].app, runIds, true))) continue;
      if (sched && !(await sched.ready())) continue;
      // Everything rests: first the actions whose moment never came, then zombies, then the operator.
      const left = c.actions.find((a) => !applied.has(a));
      if (left) {
        await apply(left);
        continue;
      }
      const zombies = plan.frozen.filter((f) => f.release === 'settled').map((f) => f.worker);
      if (zombies.length) {
        plan.frozen.filter((f) => f.release === 'settled').forEach((f) => plan.release(f));
        await Promise.all(
          zombies.map((w) => Promise.race([(w as Booted).app.get(DurableWorker).idle(), sleep(3000)])),
        );
        continue;
      }
      let decided = false;
      for (let r = 0; r < runIds.length; r++)
        decided = (await decide(ws[0].app, runIds[r], c.programs[r])) || decided;
      if (decided) continue;
      // Zombies waiting for a takeover that will never come (the run finished first) wake now.
      if (plan.releaseAll()) {
        await sleep(50);
        continue;
      }
      // A run still held back by a limit: its slot's holder ended; the sweep (each round) wakes it.
      if (!(await settled(ws[0].app, runIds))) continue;
      // A failover under way: what looks settled may be lost with the old primary's last commits.
      if (plan.outage) {
        await plan.outage;
        continue;
      }
      return [];
    } catch (err) {
      // Around a real failover the harness's own reads fail too (the primary is gone, connections cut).
      if (!outages) throw err;
      await sleep(50);
    }
  }
  const views = await Promise.all(runIds.map((id) => live()[0]?.app.get(RunRepository).get(id)));
  return [
    `case did not settle within ${CASE_TIMEOUT_MS} ms: ${views.map((v) => `${v?.id} ${v?.status} (${v?.parkedReason ?? ''}, due ${v?.availableAt?.toISOString()})`).join('; ')}`,
  ];
}

/**
 * Every run terminal, or waiting with no due time (parked until someone acts); and so is every child
 * run they started (a child's end reaches its parent, a parent's end its children). The children are
 * read after their parents, and the parents again after them: a child that ended in between touched
 * its parent's row (`updatedAt`), so the case is not called settled on a torn read. `held`: a run held
 * back by a full limit rests too (with `holdSlotWhileWaiting` it may wait for a run parked until the
 * operator acts, which the harness does only at rest); the case ends only when none is held.
 */
async function settled(app: INestApplication, runIds: string[], held = false): Promise<boolean> {
  const runs = app.get(RunRepository);
  const rests = (r: RunView | null) =>
    !!r &&
    (TERMINAL.includes(r.status) ||
      (r.status === 'waiting' && !Number.isFinite(new Date(r.availableAt as never).getTime())) ||
      (held && !!r.limitedBy && ['pending', 'waiting'].includes(r.status)));
  const first = await Promise.all(runIds.map((id) => runs.get(id)));
  if (!first.every(rests)) return false;
  const pages = await Promise.all(runIds.map((id) => runs.list({ parentId: id, limit: 500 })));
  if (!pages.flatMap((p) => p.items).every(rests)) return false;
  const again = await Promise.all(runIds.map((id) => runs.get(id)));
  return again.every((r, i) => r!.updatedAt.getTime() === first[i]!.updatedAt.getTime());
}
