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
 * - a cancel at C is an AbortSignal the run observes at its next durable occurrence: unless the run
 *   finished before C, it ends `cancelled`; what was called before C happened (a command's effect, a
 *   step's body, a child's start; steps and commands running at C finish), nothing is called from C on,
 *   and pending timers and waits are dropped. A cancelled run has no output: its effects, the calls
 *   made and its status are compared, not its trace.
 *
 * Alongside the outcome it lists every occurrence (an event at a virtual time, with the event in whose
 * continuation it was called): cases.ts checks that two not causally ordered are GAP_UNITS apart.
 */
import type { DiffCase, Mutation, Op } from './program';
import { interpret, OpFailure, type Hooks, type Json, type Out, type Outcome, type Prims } from './interpret';
import { plainSignals } from './plain-signals';
import type { Occurrence, PlainResult, Queued } from './plain-types';

export type { CallKind, Occurrence, PlainResult } from './plain-types';

const tick = () => new Promise<void>((r) => setImmediate(r));

export async function runPlain(c: DiffCase, mutation?: Mutation, maxUnits = Infinity): Promise<PlainResult> {
  let now = 0;
  let seq = 0;
  let current = 0;
  let ended = false;
  let invalid: string | null = null;
  /** Steps and commands running; when run() returned and none runs, the run finished (at `finished`). */
  let live = 0;
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
    wait: boolean,
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
  const never = new Promise<Out>(() => undefined);
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
        if (loser(label)) tags.add(`loser ${kind} finished after its race`);
        if (ended) tags.add(`${kind} let finish after run() returned`);
        resolve({ v: `${kind === 'step' ? 's' : 'c'}:${label}`, t: to });
      }),
    );
  };

  /** Per patch op: the old code got past its first position; the answer once the new code asked. */
  const oldPassed = new Set<string>();
  const answers = new Map<string, boolean>();
  const onOld = () => c.deploy !== undefined && now < c.deploy;

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
    child(label, d, timeout, at) {
      if (!called(label, at)) return never;
      calls.set(label, { kind: 'child', from: now, to: now + d });
      const to = now + d;
      let done = false;
      return new Promise((resolve, reject) => {
        if (timeout !== null)
          schedule(now + timeout, `timeout ${label}`, true, () => {
            if (done) return;
            done = true;
            tags.add('child wait timed out (child cancelled)');
            reject(new OpFailure('timeout', now));
          });
        schedule(to, `child ${label}`, true, () => {
          if (done) return;
          done = true;
          if (live > 0) tags.add('child ended while its parent ran a call');
          tags.add(timeout === null ? 'child waited for' : 'child waited for with a timeout');
          if (loser(label)) tags.add('loser child ended after its race');
          resolve({ v: `k:${label}`, t: to });
        });
      });
    },
    patched(label, old) {
      if (onOld()) {
        // The old code takes the old path without asking. It got past the op's first position once a
        // command or sleep there is called (reserved, due time written), a step once it settled
        // (committed) before the deploy.
        if (old.t !== 'step' || now + old.d < c.deploy!) oldPassed.add(label);
        return false;
      }
      if (!answers.has(label) && c.deploy !== undefined)
        tags.add(
          oldPassed.has(label) ? 'patch: old path after the deploy' : 'patch: new path after the deploy',
        );
      if (!answers.has(label)) answers.set(label, !oldPassed.has(label));
      tags.add(answers.get(label) ? 'patched in a loop: new path' : 'patched in a loop: old path');
      return answers.get(label)!;
    },
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
        if (ended) tags.add('cancel after run() returned, calls still live');
        else if (live) tags.add('cancel while a step or command runs');
        else tags.add('cancel while parked');
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
      if (failed) tags.add(`${op.t} rejected`);
    },
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
    if (ended && !live && finished === null && cancelled === null) finished = now;
    if (!ended || marked || cancelled !== null) return;
    marked = true;
    end = now;
    occurrences.push({ id: occurrences.length, time: now, parent: current, what: 'end' });
  };
  await tick();
  mark();
  while (queue.length) {
    queue.sort((x, y) => x.key - y.key || x.seq - y.seq);
    const e = queue.shift()!;
    if ((ended || cancelled !== null) && e.wait) continue; // dropped: run() returned, or cancelled
    now = Math.max(now, e.time);
    current = e.id;
    e.fire();
    await tick();
    mark();
  }
  if (cancelled !== null) end = Math.max(end, now);
  else if (!outcome) return { ...result(), invalid: 'run() never returns (a wait nothing answers)' };
  return result();

  function result(): PlainResult {
    if (end > maxUnits) invalid ??= `takes ${end} units (more than ${maxUnits})`;
    return {
      outcome: outcome ?? { trace: [], value: null },
      status: cancelled === null ? 'succeeded' : 'cancelled',
      effects,
      end,
      invalid,
      occurrences,
      calls,
      tags,
    };
  }
}
