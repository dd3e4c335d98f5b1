/**
 * The promise, checked after a case from the database (the record) and the world (what happened):
 * effects at the targets, values consumers saw, runs left behind, epochs, re-executed steps.
 */
import { isDeepStrictEqual } from 'node:util';
import type { TestDatabase } from '../helpers/database';
import type { FaultPlan } from './faults';
import type { Case, Program } from './program';
import { checkRecord, Rows } from './record-checks';
import { checkChildren } from './child-checks';
import { checkStreams } from './stream-checks';
import { checkPatches } from './patch-checks';
import type { FakeVendor, World } from './world';
import { beginsOverRate, holdsOf, slotViolations } from '../helpers/slot-holds';
import { MODEL_BUDGET, MODEL_BUDGET_LIMITS, MODEL_LIMITS } from './workflow';

const STEP_NAMES = ['compute_step', 'model_step', 'tool_step', 'emitting_step'];

export async function checkInvariants(
  db: TestDatabase,
  world: World,
  c: Case,
  runIds: string[],
  plan: FaultPlan,
): Promise<string[]> {
  const q = (sql: string) => db.query(sql, [runIds]);
  const rows: Rows = {
    runs: await q(
      `select id, status, parked_reason, cancel_requested_at, error, available_at = 'infinity' as forever
         from ai_runs where id = any($1)`,
    ),
    commands: await q(`select * from ai_commands where run_id = any($1)`),
    checkpoints: await q(`select * from ai_checkpoints where run_id = any($1) order by run_id, step_index`),
    events: await q(`select * from ai_events where run_id = any($1) order by id`),
    signals: await q(`select * from ai_signals where run_id = any($1) order by id`),
  };
  const out: string[] = [];
  const short = (id: string) => `run#${runIds.indexOf(id)}`;
  out.push(...checkRecord(rows, c, runIds, short));
  out.push(...checkEffects(world, rows, short));
  runIds.forEach((id, r) => out.push(...checkConsumers(world, rows, id, c.programs[r], short(id))));
  out.push(...checkReExecutions(world, plan, short));
  out.push(...(await checkStreams(db, runIds, c.programs, short)));
  out.push(...checkPatches(rows, world, runIds, c.programs, short));
  // Model budgets: never more calls admitted in a window than the budget allows (the twin runs later).
  const admitted = await db.query(
    `select (extract(epoch from at) * 1000)::float8 as at from ai_budget_use where budget = $1 order by at, id`,
    [MODEL_BUDGET],
  );
  const { requests, periodMs } = MODEL_BUDGET_LIMITS;
  for (let j = requests; j < admitted.length; j++)
    if (admitted[j].at - admitted[j - requests].at < periodMs - 0.01)
      out.push(
        `budget: ${requests + 1} calls admitted within ${admitted[j].at - admitted[j - requests].at} ms`,
      );
  const children = await q(`select * from ai_runs where parent_id = any($1)`);
  out.push(...checkChildren(rows, children, world, short));
  // Concurrency limits, from the statements that take and free slots (test/helpers/slot-holds.ts).
  const holds = holdsOf(rows.events, () => !!c.hold);
  if (!c.limited && holds.length)
    out.push(`slots: ${holds.length} slots taken by runs of a kind without limits`);
  out.push(
    ...slotViolations(holds, (s) => (JSON.parse(s).length === 1 ? MODEL_LIMITS.kind : MODEL_LIMITS.key)),
  );
  // Rate limits: one token per run (its first claim only), never more than the limit in a window.
  const begins = rows.events.filter((e) => e.event_type === 'run.claimed');
  const tokens = begins.filter((e) => e.payload?.rateToken).length;
  const begun = new Set(begins.map((e) => e.run_id)).size; // a run cancelled before any claim never began
  if (tokens !== (c.limited ? begun : 0))
    out.push(`rate: ${tokens} rate tokens taken for ${begun} runs begun (limited: ${!!c.limited})`);
  out.push(...beginsOverRate(begins, MODEL_LIMITS.rate.limit, MODEL_LIMITS.rate.periodMs));
  // A value drawn inside a command body is the same on every send of its key.
  for (const [key, values] of world.drawn)
    if (values.size > 1)
      out.push(
        `a command body drew ${values.size} different values under ${key.slice(key.indexOf(':step_'))}`,
      );
  return out;
}

/** At most one effect per key and per logical op; exactly one for a command that succeeded by itself. */
function checkEffects(world: World, rows: Rows, short: (id: string) => string): string[] {
  const out: string[] = [];
  const byKey = new Map(rows.commands.map((r) => [r.idempotency_key as string, r]));
  for (const [name, v] of [
    ['dedup', world.dedup],
    ['plain', world.plain],
  ] as [string, FakeVendor][]) {
    const keys = new Set(v.calls.map((c) => c.key));
    const opKeys = new Map<string, Set<string>>();
    for (const k of keys) {
      const call = v.calls.find((c) => c.key === k)!;
      const n = v.effects(k);
      const row = byKey.get(k);
      const where = `${short(call.runId)} op ${call.op} key …${k.slice(k.indexOf(':step_'))}`;
      if (n > 1) out.push(`${name} target applied ${where} ${n} times (policy ${k.split(':').pop()})`);
      if (!row) out.push(`${name} target got ${where}, which has no command row`);
      else if (n > 0 && ['failed', 'rejected'].includes(row.status))
        out.push(`${name} target applied ${where}, recorded ${row.status}`);
      if (n > 0) {
        const s = opKeys.get(`${call.runId}/${call.op}`) ?? new Set();
        opKeys.set(`${call.runId}/${call.op}`, s.add(k));
      }
    }
    for (const [op, ks] of opKeys)
      if (ks.size > 1) out.push(`${name} target applied logical op ${op} under ${ks.size} different keys`);
  }
  for (const r of rows.commands) {
    if (r.status !== 'succeeded' || r.resolution === 'manual') continue;
    const v = (r.command_name as string).startsWith('plain') ? world.plain : world.dedup;
    const n = v.effects(r.idempotency_key);
    if (n !== 1)
      out.push(`${short(r.run_id)} command ${r.payload.op} succeeded (not by an operator) with ${n} effects`);
  }
  return out;
}

/** The step op whose output a command op's amount came from (null: none). */
function sourceOf(p: Program, op: string): string | null {
  let last: string | null = null;
  for (const o of p.ops) {
    if (o.t === 'step') last = o.id;
    if (o.t === 'loop') last = null; // the amount came from the loop's last sub-step: not checked here
    if (o.t === 'cmd' && o.id === op) return last;
    if (o.t === 'fan') for (const b of o.branches) if (b.id === op) return `${b.id}s`;
  }
  return null;
}

/** Every consumer of a step's or command's output saw the recorded value; commands got recorded args. */
function checkConsumers(world: World, rows: Rows, runId: string, p: Program, run: string): string[] {
  const out: string[] = [];
  const cps = rows.checkpoints.filter((c) => c.run_id === runId && STEP_NAMES.includes(c.step_name));
  const stepCp = (op: string) => cps.filter((c) => c.output?.op === op);
  const cmds = rows.commands.filter((c) => c.run_id === runId);
  for (const o of world.observations.filter((x) => x.runId === runId)) {
    const v = o.value as Record<string, unknown>;
    if (o.op.endsWith('s') || p.ops.some((x) => x.id === o.op && x.t === 'step')) {
      const rec = stepCp(o.op);
      if (rec.length > 1) out.push(`${run} step ${o.op} has ${rec.length} checkpoints`);
      else if (!rec.length)
        out.push(`${run} step ${o.op}: epoch ${o.epoch} saw ${o.value} but nothing is recorded`);
      else if (!isDeepStrictEqual(rec[0].output, o.value))
        out.push(`${run} step ${o.op}: epoch ${o.epoch} saw n=${v.n}, recorded n=${rec[0].output.n}`);
      continue;
    }
    if (!('ok' in v) && !('failed' in v)) continue; // waits and clocks: checked elsewhere
    const mine = cmds.filter((c) => c.payload?.op === o.op);
    if (mine.length !== 1) out.push(`${run} command ${o.op} has ${mine.length} command rows`);
    if ('ok' in v) {
      const r = v.ok as { op?: string };
      if (r?.op !== o.op) out.push(`${run} command ${o.op}: epoch ${o.epoch} got the result of ${r?.op}`);
      else if (mine.length === 1 && !isDeepStrictEqual(mine[0].result, r))
        out.push(`${run} command ${o.op}: epoch ${o.epoch} saw a result other than the recorded one`);
    } else if (mine.length === 1 && !['failed', 'rejected'].includes(mine[0].status))
      out.push(`${run} command ${o.op}: epoch ${o.epoch} saw a failure, recorded ${mine[0].status}`);
  }
  for (const call of [...world.dedup.calls, ...world.plain.calls].filter((x) => x.runId === runId)) {
    const src = sourceOf(p, call.op);
    const rec = src ? stepCp(src) : [];
    if (rec.length === 1 && rec[0].output.amount !== call.amount)
      out.push(
        `${run} command ${call.op} sent amount ${call.amount}; recorded step ${src} says ${rec[0].output.amount}`,
      );
  }
  // Recorded values: once an epoch wrote after taking one, every later epoch must see the same.
  const clocks = world.observations.filter(
    (x) => x.runId === runId && p.ops.some((y) => y.id === x.op && y.t === 'clock'),
  );
  for (const o of clocks) {
    const sealed = world.hits.some(
      (h) =>
        h.runId === runId &&
        h.epoch === o.epoch &&
        h.point === 'after-write' &&
        h.seq > o.seq &&
        !/^(tool\.command_(?!reserved)|command\.)/.test(h.detail ?? ''),
    );
    if (!sealed) continue;
    for (const later of clocks)
      if (later.op === o.op && later.epoch > o.epoch && !isDeepStrictEqual(later.value, o.value))
        out.push(
          `${run} ctx.now()/uuid() of ${o.op}: epoch ${o.epoch} took and wrote one value, epoch ${later.epoch} saw another`,
        );
  }
  return out;
}

/** A step body runs again only after its epoch was cut by a fault, parked, or the run was retried. */
function checkReExecutions(world: World, plan: FaultPlan, short: (id: string) => string): string[] {
  const out: string[] = [];
  const groups = new Map<string, { runId: string; op: string; epochs: number[] }>();
  for (const e of world.executions) {
    const g = groups.get(`${e.runId}/${e.op}`) ?? { runId: e.runId, op: e.op, epochs: [] };
    g.epochs.push(e.epoch);
    groups.set(`${e.runId}/${e.op}`, g);
  }
  for (const g of groups.values()) {
    let unexplained = 0;
    for (let i = 0; i + 1 < g.epochs.length; i++) {
      const [e, next] = [g.epochs[i], g.epochs[i + 1]];
      if (next < e) {
        // A superseded epoch ran the body after a newer one: a zombie calling out after the takeover,
        // or (no fault injected on it) a claim whose lease the engine itself stopped renewing.
        const why = plan.faulted.has(`${g.runId}:${next}`)
          ? 'a zombie ran it after the takeover'
          : 'no fault was injected on that epoch: its worker lost the lease by itself';
        out.push(`${short(g.runId)} step ${g.op}: superseded epoch ${next} ran it after epoch ${e} (${why})`);
        continue;
      }
      const tag = `${g.runId}:${e}`;
      if (g.epochs[i] === g.epochs[i + 1] || !(plan.faulted.has(tag) || plan.parked.has(tag))) unexplained++;
    }
    if (unexplained > (world.retries.get(g.runId) ?? 0))
      out.push(
        `${short(g.runId)} step ${g.op} executed ${g.epochs.length} times (epochs ${g.epochs.join(',')}) with no fault to explain it`,
      );
  }
  return out;
}
