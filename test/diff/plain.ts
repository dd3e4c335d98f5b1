/**
 * The plain run: the interpreter (interpret.ts) with primitives on a virtual clock, a small
 * discrete-event simulator. No engine, no database. It models the semantics the engine implements:
 *
 * - a step or command called at t settles at t + d (a command's effect counts when it is called: every
 *   call finishes, a race's loser too, also after run() returned);
 * - `sleep(n)` is a timer registered when called, due at t + n, fired whether or not anything awaits it;
 * - `wait(name)` reads the mailbox of `name`: the oldest signal not yet taken, else it joins the line of
 *   that name (FIFO) and takes the next arrival; with a timeout it rejects at t + timeout if still in line;
 * - `child(d)` starts a run of its own that lasts d units, and waits for its end like a step; with a
 *   timeout it rejects at t + timeout if the child has not ended (the child is cancelled then). Its end
 *   is a wait's outcome: dropped once run() returned. A running parent hears of a child's end at once
 *   (the child's end notifies it, as a signal does), also while a step or command of its parent runs;
 * - `patched(id)` (a patch op in a loop): true on new code. The fault profile's deploy at X: before X
 *   the old code takes the old path without asking; from X on the first answer is false when the old
 *   code got past the op's first position already (its step settled, its command or sleep called), else
 *   true, and it stands for every later iteration (docs/EVOLVE.md);
 * - outcomes ready at the same moment are delivered one at a time in the order they happened (a signal
 *   taken from the mailbox by when it was sent, the test sending them one after the other; a timer by
 *   its due time; ties in call order);
 * - once run() returned, pending timers and waits are dropped; steps and commands still running finish.
 *   The run finishes when run() returned and no step or command runs.
 * - a hung step (plain-hang.ts) times out at each attempt's timeout, then fails or returns on its second
 *   attempt; one without a timeout never settles and holds the finish until the engine's late-call bound
 *   after run() returned (without a bound the case is not run) or a cancel;
 * - each catch and finally block run is a mark (`<label>#catch`), listed with its time: every durable
 *   execution must have run a prefix of them (a park runs none).
 * - a cancel at C is an AbortSignal the run observes at its next durable occurrence: unless the run
 *   finished before C, it ends `cancelled`; what was called before C happened (a command's effect, a
 *   step's body, a child's start; steps and commands running at C finish), nothing is called from C on,
 *   and pending timers and waits are dropped. A cancelled run has no output: its effects, the calls
 *   made and its status are compared, not its trace.
 *
 * Alongside the outcome it lists every occurrence (an event at a virtual time, with the event in whose
 * continuation it was called): cases.ts checks that two not causally ordered are GAP_UNITS apart.
 */
import { GAP_UNITS, HEARTBEAT_MS, LATE_CALL_GRACE_UNITS, STOP_GRACE_MS } from './program';
import type { DiffCase, Mutation, Op } from './program';
import { interpret, OpFailure, type Hooks, type Json, type Out, type Outcome, type Prims } from './interpret';
import { childAtTheEnd, plainChild, plainPatched, type PrimSim } from './plain-child';
import { plainHang, type HungBody } from './plain-hang';
import { plainSignals } from './plain-signals';
import type { Drop, Occurrence, PlainMark, PlainResult, Queued } from './plain-types';

export type { CallKind, Occurrence, PlainResult } from './plain-types';
const tick = () => new Promise<void>((r) => setImmediate(r));

export async function runPlain(c: DiffCase, mutation?: Mutation, maxUnits = Infinity): Promise<PlainResult> {
  let now = 0;
  let seq = 0;
  let current = 0;
  let ended = false;
  let invalid: string | null = null;
  /** Steps and commands running (and hung bodies); when run() returned and none runs, the run finished. */
  let live = 0;
  const bodies = new Map<string, HungBody>();
  const busy = () => live + bodies.size;
  /** When a step or command last settled (the late-call bound must not compete with it). */
  let lastSettled = -Infinity;
  let extraMs = 0;
  const marks: PlainMark[] = [];
  /** Try blocks entered and not left: a park now is inside one (its blocks must not run). */
  let openTries = 0;
  let finished: number | null = null;
  let cancelled: number | null = null;
  const occurrences: Occurrence[] = [{ id: 0, time: 0, parent: null, what: 'start' }];
  const queue: Queued[] = [];
  const effects: Record<string, number> = {};
  const calls: PlainResult['calls'] = new Map();
  const tags = new Set<string>();
  const settledRaces = new Set<string>();

  const schedule = (
    time: number,
    what: string,
    wait: Drop,
    fire: () => void,
    key = time,
    parent: number | null = current,
  ) => {
    const id = occurrences.length;
    occurrences.push({ id, time, parent, what });
    queue.push({ id, key, seq: seq++, time, wait, fire });
  };
  /** A call at `at`: false when the run was cancelled (nothing is called from then on). */
  const called = (label: string, at: number) => {
    if (cancelled !== null) return false;
    if (ended) invalid ??= `${label} called after run() returned`;
    if (at !== now && !mutation) throw new Error(`interpreter: ${label} called at ${at}, clock at ${now}`);
    return true;
  };
  const never = new Promise<Out>(() => undefined); // a call never made: the run was cancelled
  /** A loser: an op under a race or any that already settled. */
  const loser = (label: string) => [...settledRaces].some((r) => label.startsWith(`${r}.`));

  const leaf = (kind: 'step' | 'cmd') => (label: string, d: number, at: number) => {
    if (!called(label, at)) return never;
    if (kind === 'cmd') effects[label] = (effects[label] ?? 0) + 1;
    calls.set(label, { kind, from: now, to: now + d });
    const to = now + d;
    live++;
    return new Promise<Out>((resolve) =>
      schedule(to, `${kind} ${label}`, false, () => {
        live--;
        lastSettled = now;
        if (loser(label)) tags.add(`loser ${kind} finished after its race`);
        if (ended) tags.add(`${kind} let finish after run() returned`);
        resolve({ v: `${kind === 'step' ? 's' : 'c'}:${label}`, t: to });
      }),
    );
  };

  const sim: PrimSim = { now: () => now, called, schedule, loser, tags, calls, busy };
  const prims: Prims = {
    step: leaf('step'),
    cmd: leaf('cmd'),
    sleep(label, n, at) {
      if (!called(label, at)) return never;
      const due = now + n;
      return new Promise((resolve) =>
        schedule(due, `sleep ${label}`, true, () => {
          tags.add(loser(label) ? 'loser timer fired after its race' : 'sleep fired');
          resolve({ v: 'slept', t: due });
        }),
      );
    },
    wait: plainSignals({ now: () => now, occurrences, schedule, called, loser, tags }, c),
    child: plainChild(sim),
    hang: plainHang({
      now: () => now,
      schedule,
      called,
      loser,
      ended: () => ended,
      invalid: (why) => (invalid ??= why),
      tags,
      calls,
      bodies,
    }),
    patched: plainPatched(sim, c),
  };
  if (c.cancel !== undefined) {
    const at = c.cancel;
    schedule(
      at,
      'cancel',
      false,
      () => {
        if (finished !== null) return void tags.add('cancel lost to the finish');
        cancelled = at;
        if (bodies.size) {
          tags.add('cancel while a body hangs');
          // Found at a heartbeat; a body that ignores its signal is abandoned after the stop's grace.
          extraMs = HEARTBEAT_MS + ([...bodies.values()].some((b) => b.deaf) ? STOP_GRACE_MS : 0);
        }
        if (ended) tags.add('cancel after run() returned, calls still live');
        else if (live) tags.add('cancel while a step or command runs');
        else if (!bodies.size) tags.add('cancel while parked');
      },
      at,
      null,
    );
  }

  const hooks: Hooks = {
    settled(op: Op, label: string, failed: boolean, v: Json) {
      tags.add(op.t === 'loop' ? (op.par ? 'loop (parallel)' : 'loop') : op.t);
      if (op.t === 'race' || op.t === 'any') settledRaces.add(label);
      if (op.t === 'try' && JSON.stringify(v) === JSON.stringify({ caught: 'timeout' }))
        tags.add('try/catch timeout');
      if (op.t === 'try' && failed) tags.add('try: catch rethrew');
      if (failed) tags.add(`${op.t} rejected`);
    },
    mark(what) {
      marks.push({ what, time: now });
      if (what.endsWith('#finally') && openTries--) tags.add('try: finally ran');
      if (what.endsWith('#catch')) tags.add('try: catch ran');
    },
    enter: () => void openTries++,
  };

  let outcome: Outcome | null = null;
  let end = 0;
  let marked = false;
  void interpret(c.ops, prims, mutation, hooks).then((o) => {
    outcome = o;
    ended = true;
  });
  /** run() returned in the continuation of the current occurrence: the end is one more. */
  const mark = () => {
    if (!ended && !busy() && openTries > 0 && cancelled === null) tags.add('park inside a try block');
    if (ended && !busy() && finished === null && cancelled === null) finished = now;
    if (!ended || marked) return;
    marked = true;
    // From run()'s return (also one after a cancel the engine has not found yet): the late-call bound.
    if (busy() && LATE_CALL_GRACE_UNITS !== null)
      schedule(now + LATE_CALL_GRACE_UNITS, 'late-call bound', false, lateBound);
    if (cancelled !== null) return; // a cancelled run's end: its cancel and what ran on (below)
    end = now;
    occurrences.push({ id: occurrences.length, time: now, parent: current, what: 'end' });
  };
  /** `worker.lateCallGraceMs` after run() returned: the engine abandons the calls still live. */
  const lateBound = () => {
    if (!busy()) return;
    if (live || now - lastSettled < GAP_UNITS || [...bodies.values()].some((b) => !b.forever))
      invalid ??= 'a call outlives the late-call bound';
    // Given up on in call order: each step fails, and code waiting on it (a loser's try) runs.
    const given = [...bodies].filter(([, b]) => b.forever);
    given.forEach(([label]) => bodies.delete(label));
    given.forEach(([, b]) => b.abandon?.(new OpFailure('abandoned', now)));
    tags.add('hung loser abandoned after run() returned');
  };
  await tick();
  mark();
  while (queue.length) {
    queue.sort((x, y) => x.key - y.key || x.seq - y.seq);
    const e = queue.shift()!;
    if ((ended || cancelled !== null) && e.wait === true) continue; // dropped: run() returned, or cancelled
    now = Math.max(now, e.time);
    current = e.id;
    e.fire();
    await tick();
    mark();
  }
  // A cancelled run ends after its cancel and the steps and commands that ran on (a hung body is bounded
  // by extraMs).
  if (cancelled !== null) end = Math.max(end, cancelled, lastSettled);
  else if (!outcome) return { ...result(), invalid: 'run() never returns (a wait nothing answers)' };
  else if (bodies.size) invalid ??= 'a hung call holds the run (no late-call bound)';
  return result();

  function result(): PlainResult {
    if (end > maxUnits) invalid ??= `takes ${end} units (more than ${maxUnits})`;
    if (cancelled === null) invalid ??= childAtTheEnd(calls, finished);
    return {
      outcome: outcome ?? { trace: [], value: null, counts: { catch: 0, finally: 0 } },
      status: cancelled === null ? 'succeeded' : 'cancelled',
      effects,
      end,
      horizon: Math.max(end, ...marks.map((m) => m.time)),
      finished: cancelled === null ? finished : null,
      extraMs,
      marks,
      invalid,
      occurrences,
      calls,
      tags,
    };
  }
}
