/**
 * The promise, checked after a case from the database (the record) and the world (what happened):
 * effects at the targets, values consumers saw, runs left behind, epochs, re-executed steps.
 */
import { isDeepStrictEqual } from 'node:util';
import type { TestDatabase } from '../helpers/database';
import type { FaultPlan } from './faults';
import type { Case, Program } from './program';
import { checkRecord, generations, Rows } from './record-checks';
import { keyedOp, specOf } from './actions';
import { inNextGeneration } from './grammar';
import { checkChildren } from './child-checks';
import { checkStreams } from './stream-checks';
import { checkPatches } from './patch-checks';
import { showToken, timelineOf, type FakeVendor, type World } from './world';
import { beginsOverRate, holdsOf, slotViolations } from '../helpers/slot-holds';
import { MODEL_BUDGET, MODEL_BUDGET_LIMITS, MODEL_LIMITS } from './workflow';
import { TRAIL } from '../helpers/event-trail';

const STEP_NAMES = ['compute_step', 'model_step', 'tool_step', 'emitting_step'];
/** A key without its run part: `step_3:dedup_lookup`, `key_o2:plain_manual`. */
const keyTail = (key: string) => key.replace(/^run_[^:]+(:g\d+)?:/, ':');

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
    // The case's runs' commands and their child runs' (a child's command counts as its parent's op).
    commands: await q(
      `select * from ai_commands
        where run_id = any($1) or run_id in (select id from ai_runs where parent_id = any($1))`,
    ),
    checkpoints: await q(`select * from ai_checkpoints where run_id = any($1) order by run_id, step_index`),
    events: await q(`select * from ${TRAIL} t where run_id = any($1) order by id`),
    signals: await q(`select * from ai_signals where run_id = any($1) order by id`),
  };
  const out: string[] = [];
  const short = (id: string) => `run#${runIds.indexOf(id)}`;
  out.push(...checkRecord(rows, c, runIds, short));
  out.push(...checkEffects(world, rows, short, keyedOp(c.programs, runIds)));
  const lost = lostWrites(world, rows);
  runIds.forEach((id, r) => {
    out.push(...checkConsumers(world, rows, id, c.programs[r], short(id), lost));
    out.push(...checkEarlierGeneration(world, rows, id, c.programs[r], short(id)));
  });
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
    // Drawn by claims on one timeline (a lost suffix may take the recorded draw with it).
    if (new Set([...values.values()].map(timelineOf)).size < values.size)
      out.push(`a command body drew ${values.size} different values under ${keyTail(key)}`);
  return out;
}

/** At most one effect per key and per logical op; exactly one for a command that succeeded by itself. */
function checkEffects(
  world: World,
  rows: Rows,
  short: (id: string) => string,
  keyed: (runId: string, op: string) => boolean,
): string[] {
  const out: string[] = [];
  // After a real lost suffix: a key only claims of the old timeline sent may have lost its row with the
  // suffix (the run did not reach that call again), and a command keyed by its position may have been
  // numbered anew by the re-run (docs/OPERATIONS.md): its op may then show under two keys. A command
  // with a key of its own is held to one key per op.
  const after = world.lostSuffix?.timeline;
  const onlyOld = (k: string, v: FakeVendor) =>
    !!after && v.calls.every((c) => c.key !== k || timelineOf(c.token) < after);
  const byKey = new Map(rows.commands.map((r) => [r.idempotency_key as string, r]));
  const generation = generations(rows);
  const continuedPast = (k: string) => {
    const [, runId, g] = /^run_([^:]+)(?::g(\d+))?:/.exec(k) ?? [];
    return Number(g ?? 0) < (generation.get(runId) ?? 0);
  };
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
      const where = `${short(call.runId)} op ${call.op} key …${keyTail(k)}`;
      if (n > 1) out.push(`${name} target applied ${where} ${n} times (policy ${k.split(':').pop()})`);
      if (!row) {
        // A key of a generation the run left behind (continueAsNew deletes its commands).
        if (!onlyOld(k, v) && !continuedPast(k))
          out.push(`${name} target got ${where}, which has no command row`);
      } else if (n > 0 && ['failed', 'rejected'].includes(row.status))
        out.push(`${name} target applied ${where}, recorded ${row.status}`);
      if (n > 0) {
        const s = opKeys.get(`${call.runId}/${call.op}`) ?? new Set();
        opKeys.set(`${call.runId}/${call.op}`, s.add(k));
      }
    }
    for (const [op, ks] of opKeys) {
      const [runId, id] = op.split('/');
      const renumbered = !!after && !keyed(runId, id) && [...ks].some((k) => onlyOld(k, v));
      if (ks.size > 1 && !renumbered)
        out.push(`${name} target applied logical op ${op} under ${ks.size} different keys`);
    }
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

/** The `continue` op of a program whose run continued as new (its record is the next generation's). */
function continuedAt(rows: Rows, runId: string, p: Program): { id: string } | undefined {
  if (!generations(rows).has(runId)) return;
  return p.ops.find((o) => o.t === 'continue');
}

/**
 * What a generation before the last one did, checked against the targets (its record is deleted): a
 * command it saw succeed took exactly one effect at its target (more is flagged by checkEffects).
 */
function checkEarlierGeneration(world: World, rows: Rows, runId: string, p: Program, run: string): string[] {
  const cont = continuedAt(rows, runId, p);
  if (!cont) return [];
  const out: string[] = [];
  for (const o of world.observations) {
    if (o.runId !== runId || inNextGeneration(cont, o.op) || !('ok' in (o.value as object))) continue;
    const spec = specOf(p, o.op);
    if (!spec) continue;
    const v = spec.cmd.startsWith('plain') ? world.plain : world.dedup;
    const keys = new Set(v.calls.filter((c) => c.runId === runId && c.op === o.op).map((c) => c.key));
    const n = [...keys].reduce((sum, k) => sum + v.effects(k), 0);
    if (n !== 1 && !world.lostSuffix)
      out.push(`${run} command ${o.op} (a generation before the last) was seen to succeed with ${n} effects`);
  }
  return out;
}

/** The step op whose output a command op's amount came from (null: none). */
function sourceOf(p: Program, op: string): string | null {
  let last: string | null = null;
  for (const o of p.ops) {
    if (o.t === 'continue') {
      // A next generation starts from nothing: its first command sends 0, the others the step before.
      last = null;
      for (const x of o.ops) {
        if (x.t === 'step') last = x.id;
        if (x.t === 'cmd' && x.id === op) return last;
      }
    }
    if (o.t === 'step') last = o.id;
    if (o.t === 'loop') last = null; // the amount came from the loop's last sub-step: not checked here
    if (o.t === 'patch') last = null; // from the step of the path the claim took: not checked here
    if (o.t === 'emit' && o.where !== 'body') last = `${o.id}s`;
    if (o.t === 'cmd' && o.id === op) return last;
    if (o.t === 'fan') for (const b of o.branches) if (b.id === op) return `${b.id}s`;
  }
  return null;
}

/** Every consumer of a step's or command's output saw the recorded value; commands got recorded args. */
function checkConsumers(
  world: World,
  rows: Rows,
  runId: string,
  p: Program,
  run: string,
  lost: LostWrites,
): string[] {
  const out: string[] = [];
  const cps = rows.checkpoints.filter((c) => c.run_id === runId && STEP_NAMES.includes(c.step_name));
  const stepCp = (op: string) => cps.filter((c) => c.output?.op === op);
  const cmds = rows.commands.filter((c) => c.run_id === runId);
  // A run continued as new holds only its last generation's record: what the one before it saw is
  // checked against the targets instead (checkEarlierGeneration).
  const cont = continuedAt(rows, runId, p);
  for (const o of world.observations.filter((x) => x.runId === runId)) {
    if (cont && !inNextGeneration(cont, o.op)) continue;
    const v = o.value as Record<string, unknown>;
    if (o.op.endsWith('s') || p.ops.some((x) => x.id === o.op && x.t === 'step')) {
      const rec = stepCp(o.op);
      if (rec.length <= 1 && lost(runId, o.epoch, rec[0]?.epoch)) continue;
      if (rec.length > 1) out.push(`${run} step ${o.op} has ${rec.length} checkpoints`);
      else if (!rec.length)
        out.push(`${run} step ${o.op}: ${showToken(o.epoch)} saw ${o.value} but nothing is recorded`);
      else if (!isDeepStrictEqual(rec[0].output, o.value))
        out.push(`${run} step ${o.op}: ${showToken(o.epoch)} saw n=${v.n}, recorded n=${rec[0].output.n}`);
      continue;
    }
    if (!('ok' in v) && !('failed' in v)) continue; // waits and clocks: checked elsewhere
    const mine = cmds.filter((c) => c.payload?.op === o.op);
    if (mine.length <= 1 && lost(runId, o.epoch, mine[0]?.epoch)) continue;
    if (mine.length !== 1) out.push(`${run} command ${o.op} has ${mine.length} command rows`);
    if ('ok' in v) {
      const r = v.ok as { op?: string };
      // After a lost suffix a command keyed by its position may take the position (and key) of another.
      if (r?.op !== o.op && !(world.lostSuffix && !specOf(p, o.op)?.keyed))
        out.push(`${run} command ${o.op}: ${showToken(o.epoch)} got the result of ${r?.op}`);
      else if (mine.length === 1 && !isDeepStrictEqual(mine[0].result, r))
        out.push(`${run} command ${o.op}: ${showToken(o.epoch)} saw a result other than the recorded one`);
    } else if (mine.length === 1 && !['failed', 'rejected'].includes(mine[0].status))
      out.push(`${run} command ${o.op}: ${showToken(o.epoch)} saw a failure, recorded ${mine[0].status}`);
  }
  for (const call of [...world.dedup.calls, ...world.plain.calls].filter((x) => x.runId === runId)) {
    const src = sourceOf(p, call.op);
    const rec = src ? stepCp(src) : [];
    if (rec.length === 1 && rec[0].output.amount !== call.amount && !lost(runId, call.token, rec[0].epoch))
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
      if (
        later.op === o.op &&
        later.epoch > o.epoch &&
        !isDeepStrictEqual(later.value, o.value) &&
        // What o's claim wrote may be gone with a lost suffix: a claim on the new timeline took its own.
        !(world.lostSuffix && timelineOf(later.epoch) > timelineOf(o.epoch))
      )
        out.push(
          `${run} ctx.now()/uuid() of ${o.op}: ${showToken(o.epoch)} took and wrote one value, ${showToken(later.epoch)} saw another`,
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
        out.push(
          `${short(g.runId)} step ${g.op}: superseded ${showToken(next)} ran it after ${showToken(e)} (${why})`,
        );
        continue;
      }
      const tag = `${g.runId}:${e}`;
      // Every claim of a timeline a failover left (child runs' too) was cut by it. Never in the same
      // claim: a claim whose statement failed on a lost connection ends there (the run is retried).
      const failedOver = !!world.lostSuffix && timelineOf(e) < world.lostSuffix.timeline;
      const explained = e !== next && (failedOver || plan.faulted.has(tag) || plan.parked.has(tag));
      if (!explained) unexplained++;
    }
    if (unexplained > (world.retries.get(g.runId) ?? 0))
      out.push(
        `${short(g.runId)} step ${g.op} executed ${g.epochs.length} times (${g.epochs.map(showToken).join(', ')}) with no fault to explain it`,
      );
  }
  return out;
}

/**
 * With a real lost WAL suffix (world.lostSuffix), what a claim on the old timeline saw may have been
 * recorded in a commit the new primary lost: the run then ran that part again on the new timeline and
 * recorded something else, or nothing. `lost(runId, token, recordEpoch)`: true when `token` is of an
 * older timeline than the failover's and the record it is compared with (its epoch; null: none) was not
 * written by a claim of that timeline that survived. Effects at the targets stay checked strictly.
 */
type LostWrites = (runId: string, token: number, recordEpoch: number | string | null | undefined) => boolean;

function lostWrites(world: World, rows: Rows): LostWrites {
  const after = world.lostSuffix?.timeline;
  if (!after) return () => false;
  // The timeline each stored claim was made on (the run.claimed events that survived, and the new ones).
  const claimedOn = new Map<string, number>();
  for (const e of rows.events)
    if (e.event_type === 'run.claimed')
      claimedOn.set(`${e.run_id}:${Number(e.epoch)}`, Number(e.payload?.timeline));
  return (runId, token, recordEpoch) => {
    const tl = timelineOf(token);
    if (tl >= after) return false;
    if (recordEpoch === null || recordEpoch === undefined) return true;
    return claimedOn.get(`${runId}:${Number(recordEpoch)}`) !== tl;
  };
}
