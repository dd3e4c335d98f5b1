/**
 * One case, durably: start the run, send its signals on time (from the run's time 0, one after the other,
 * each with its value and its virtual time), apply a fault if asked, wait for the run to end, and read
 * its output and the world's record (effects per command, when each body was called). `compare` says
 * where it differs from the plain run.
 */
import { RunRepository } from '../../src';
import type { Outcome } from './interpret';
import type { PlainResult } from './plain';
import { signalScript, type DiffCase, type DiffInput, type Mutation } from './program';
import { dropMarks, executionsOf } from './marks';
import type { DiffWorld, Execution } from './world';
import { DIFF_KIND, type SignalPayload } from './workflow';

const TERMINAL = ['succeeded', 'failed', 'cancelled', 'dead_lettered'];
const pause = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

export interface DurableEnv {
  runs: RunRepository;
  world: DiffWorld;
  unitMs: number;
}

/** Something done to the run while it runs (a worker killed): notes for the report. */
export type Fault = (runId: string, t0: number, ended: () => boolean) => Promise<string[]>;

export interface DurableResult {
  runId: string;
  status: string;
  outcome: Outcome | null;
  error: string | null;
  effects: Record<string, number>;
  executions: Execution[];
  /** The catch and finally blocks each execution of run() ran (marks.ts), up to a cancel or lost lease. */
  blocks: Map<string, string[]>;
  /**
   * The latest a body was first called after its virtual time, a signal stored (its statement returned)
   * and the cancel stored after their times (ms): the machine's share of a divergence (competing events
   * are GAP_UNITS units apart).
   */
  lateMs: { call: number; signal: number; cancel: number; worst: string };
  epoch: number;
  notes: string[];
}

export async function runDurable(
  env: DurableEnv,
  c: DiffCase,
  plain: PlainResult,
  o: { mutation?: Mutation; fault?: Fault; slackMs?: number } = {},
): Promise<DurableResult> {
  const input: DiffInput = {
    ops: c.ops,
    unitMs: env.unitMs,
    ...(o.mutation ? { mutation: o.mutation } : {}),
  };
  const { run } = await env.runs.start(DIFF_KIND, input);
  const t0 = await Promise.race([env.world.begun(run.id), pause(20_000).then(() => null)]);
  if (t0 === null) throw new Error(`run ${run.id} never began (no worker took it?)`);
  let ended = false;
  const late = { call: 0, signal: 0, cancel: 0, worst: '' };
  const sender = (async () => {
    for (const s of signalScript(c)) {
      await pause(t0 + s.at * env.unitMs - Date.now());
      if (ended) return;
      const payload: SignalPayload = { v: s.v, at: s.at };
      await env.runs.signal(run.id, s.name, payload).catch(() => undefined); // the run may have ended
      late.signal = Math.max(late.signal, Date.now() - (t0 + s.at * env.unitMs));
    }
  })();
  const faults = o.fault ? o.fault(run.id, t0, () => ended) : Promise.resolve([]);
  const cancel = c.cancel === undefined ? null : cancelAt(env, run.id, t0, c.cancel, () => ended, late);
  const last = Math.max(plain.end, plain.finished ?? 0);
  const deadline = t0 + last * env.unitMs + plain.extraMs + (o.slackMs ?? 8_000);
  let view = (await env.runs.get(run.id))!;
  while (!TERMINAL.includes(view.status) && Date.now() < deadline) {
    await pause(40);
    view = (await env.runs.get(run.id))!;
  }
  ended = true;
  if (!TERMINAL.includes(view.status))
    await env.runs.cancel(run.id, 'differential: did not end').catch(() => {});
  const notes = await faults;
  await sender;
  if (cancel) notes.push(...(await cancel));
  const w = env.world.run(run.id);
  const blocks = executionsOf(run.id);
  dropMarks(run.id);
  // First executions only: a body run again after a takeover is late by the takeover, as it should be.
  const seen = new Set<string>();
  for (const x of w.executions) {
    if (seen.has(x.label)) continue;
    seen.add(x.label);
    if (x.at - x.due > late.call) {
      late.call = x.at - x.due;
      late.worst = `${x.kind} ${x.label}`;
    }
  }
  return {
    runId: run.id,
    status: view.status,
    outcome: view.status === 'succeeded' ? (view.output as Outcome) : null,
    error: view.error ? `${view.error.name ?? ''}: ${view.error.message}` : null,
    effects: w.effects,
    executions: w.executions,
    blocks,
    lateMs: late,
    epoch: view.epoch,
    notes,
  };
}

/** Cancels the run at `at` units (the run may have ended: then it says so). */
async function cancelAt(
  env: DurableEnv,
  runId: string,
  t0: number,
  at: number,
  ended: () => boolean,
  late: { cancel: number },
) {
  await pause(t0 + at * env.unitMs - Date.now());
  if (ended()) return ['cancel-skipped (the run ended)'];
  const view = await env.runs.cancel(runId, 'differential').catch((e: Error) => ({ status: e.name }));
  late.cancel = Date.now() - (t0 + at * env.unitMs); // when its statement returned: it is stored
  return [`cancel ${late.cancel} ms late, the run ${view.status}`];
}

/** The labels of the steps, commands and children called (the plain run's, the durable one's). */
export const calledLabels = (labels: Iterable<string>) => [...new Set(labels)].sort().join(' ');

/** JSON with object keys sorted (jsonb gives them back in its own order). */
export function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === 'object' && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)))
      : x,
  );
}

/** Where the durable run differs from the plain one: empty when they agree. */
export function compare(plain: PlainResult, d: DurableResult): string[] {
  const out: string[] = [];
  if (d.status !== plain.status)
    out.push(`run ended ${d.status}${d.error ? ` (${d.error})` : ''}, expected ${plain.status}`);
  const [pc, dc] = [calledLabels(plain.calls.keys()), calledLabels(d.executions.map((x) => x.label))];
  if (pc !== dc) out.push(`calls: expected [${pc}], got [${dc}]`);
  if (d.outcome && plain.status === 'succeeded') {
    const [e, a] = [plain.outcome.trace, d.outcome.trace];
    const i = e.findIndex((x, j) => a[j] !== x);
    if (i >= 0 || a.length !== e.length) {
      const at = i >= 0 ? i : e.length;
      out.push(`trace differs at line ${at}: expected ${e[at] ?? '(end)'}, got ${a[at] ?? '(end)'}`);
    }
    if (canonical(plain.outcome.value) !== canonical(d.outcome.value))
      out.push(`value: expected ${canonical(plain.outcome.value)}, got ${canonical(d.outcome.value)}`);
    if (canonical(plain.outcome.counts) !== canonical(d.outcome.counts))
      out.push(`counts: expected ${canonical(plain.outcome.counts)}, got ${canonical(d.outcome.counts)}`);
  }
  // Every execution of run() (a park's, a takeover's) ran a prefix of plain JavaScript's blocks.
  const blocks = plain.marks.map((m) => m.what);
  for (const [exec, ran] of d.blocks) {
    const i = ran.findIndex((x, j) => blocks[j] !== x);
    if (i >= 0)
      out.push(
        `execution ${exec} ran ${ran[i]} as its block ${i + 1}, plain JavaScript ${blocks[i] ?? 'none'} (it ran ${ran.join(' ')})`,
      );
  }
  for (const label of new Set([...Object.keys(plain.effects), ...Object.keys(d.effects)]))
    if ((plain.effects[label] ?? 0) !== (d.effects[label] ?? 0))
      out.push(
        `effects of cmd ${label}: expected ${plain.effects[label] ?? 0}, got ${d.effects[label] ?? 0}`,
      );
  return out;
}
