/**
 * The plain run: the interpreter (interpret.ts) with primitives on a virtual clock, a small
 * discrete-event simulator. No engine, no database. It models the semantics the engine implements:
 *
 * - a step or command called at t settles at t + d (a command's effect counts when it is called: every
 *   call finishes, a race's loser too, also after run() returned);
 * - `sleep(n)` is a timer registered when called, due at t + n, fired whether or not anything awaits it;
 * - `wait(name)` reads the mailbox of `name`: the oldest signal not yet taken, else it joins the line of
 *   that name (FIFO) and takes the next arrival; with a timeout it rejects at t + timeout if still in line;
 * - outcomes ready at the same moment are delivered one at a time in the order they happened (a signal
 *   taken from the mailbox by when it was sent, the test sending them one after the other; a timer by
 *   its due time; ties in call order);
 * - once run() returned, pending timers and waits are dropped; steps and commands still running finish.
 *
 * Alongside the outcome it lists every occurrence (an event at a virtual time, with the event in whose
 * continuation it was called): cases.ts checks that two not causally ordered are GAP_UNITS apart.
 */
import { signalScript, type DiffCase, type Mutation, type Op, type SignalName } from './program';
import { interpret, OpFailure, type Hooks, type Json, type Out, type Outcome, type Prims } from './interpret';

export interface Occurrence {
  id: number;
  time: number;
  /** The occurrence in whose continuation this was called; null: from outside (a signal, the start). */
  parent: number | null;
  what: string;
  /** A signal's arrival: its index in `DiffCase.signals`. */
  signal?: number;
}

interface Queued {
  id: number;
  /** Order of delivery: when it happened (a signal from the mailbox: when it was sent), then call order. */
  key: number;
  seq: number;
  time: number;
  /** Timers and waits are dropped once run() returned; steps and commands finish. */
  wait: boolean;
  fire: () => void;
}

export interface PlainResult {
  outcome: Outcome;
  /** Commands called, by label (each makes one effect). */
  effects: Record<string, number>;
  /** When run() returned (units). */
  end: number;
  /** Why the durable run cannot be compared on this case (never returns, too long, ...), or null. */
  invalid: string | null;
  occurrences: Occurrence[];
  /** Steps and commands: label → [called at, settles at] (units). */
  calls: Map<string, { kind: 'step' | 'cmd'; from: number; to: number }>;
  /** Coverage tags seen in this case. */
  tags: Set<string>;
}

const tick = () => new Promise<void>((r) => setImmediate(r));

interface Waiter {
  label: string;
  at: number;
  done: boolean;
  resolve: (o: Out) => void;
  reject: (e: unknown) => void;
}

export async function runPlain(c: DiffCase, mutation?: Mutation, maxUnits = Infinity): Promise<PlainResult> {
  let now = 0;
  let seq = 0;
  let current = 0;
  let ended = false;
  let invalid: string | null = null;
  const occurrences: Occurrence[] = [{ id: 0, time: 0, parent: null, what: 'start' }];
  const queue: Queued[] = [];
  const effects: Record<string, number> = {};
  const calls: PlainResult['calls'] = new Map();
  const tags = new Set<string>();
  const settledRaces = new Set<string>();
  /** Signals not taken yet; `key`: when each was sent (its time, then the sender's order). */
  const mailbox: Record<SignalName, { v: string; key: number }[]> = { a: [], b: [] };
  const line: Record<SignalName, Waiter[]> = { a: [], b: [] };

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
  const called = (label: string, at: number) => {
    if (ended) invalid ??= `${label} called after run() returned`;
    if (at !== now && !mutation) throw new Error(`interpreter: ${label} called at ${at}, clock at ${now}`);
  };
  /** A loser: an op under a race or any that already settled. */
  const loser = (label: string) => [...settledRaces].some((r) => label.startsWith(`${r}.`));

  const leaf = (kind: 'step' | 'cmd') => (label: string, d: number, at: number) => {
    called(label, at);
    if (kind === 'cmd') effects[label] = (effects[label] ?? 0) + 1;
    calls.set(label, { kind, from: now, to: now + d });
    const to = now + d;
    return new Promise<Out>((resolve) =>
      schedule(to, `${kind} ${label}`, false, () => {
        if (loser(label)) tags.add(`loser ${kind} finished after its race`);
        if (ended) tags.add(`${kind} let finish after run() returned`);
        resolve({ v: `${kind === 'step' ? 's' : 'c'}:${label}`, t: to });
      }),
    );
  };

  const prims: Prims = {
    step: leaf('step'),
    cmd: leaf('cmd'),
    sleep(label, n, at) {
      called(label, at);
      const due = now + n;
      return new Promise((resolve) =>
        schedule(due, `sleep ${label}`, true, () => {
          tags.add(loser(label) ? 'loser timer fired after its race' : 'sleep fired');
          resolve({ v: 'slept', t: due });
        }),
      );
    },
    wait(label, name, timeout, at) {
      called(label, at);
      const kind = timeout === null ? 'signal wait without timeout' : 'signal wait with timeout';
      return new Promise((resolve, reject) => {
        const taken = mailbox[name].shift();
        if (taken) {
          // Ready now; delivered in the order it happened (when it was sent) among what is ready now.
          return schedule(
            now,
            `mailbox ${label}`,
            true,
            () => {
              tags.add(`${kind}: got a signal`).add('signal before wait');
              resolve({ v: taken.v, t: now });
            },
            taken.key,
          );
        }
        const w: Waiter = { label, at: now, done: false, resolve, reject };
        if (line[name].length) tags.add('two waits of one name pending (FIFO)');
        line[name].push(w);
        w.resolve = (o) => {
          tags.add(`${kind}: got a signal`);
          if (loser(label)) tags.add('loser signal wait took a later signal');
          resolve(o);
        };
        if (timeout !== null)
          schedule(now + timeout, `timeout ${label}`, true, () => {
            if (w.done) return;
            w.done = true;
            line[name].splice(line[name].indexOf(w), 1);
            tags.add('signal wait timed out');
            reject(new OpFailure('timeout', now));
          });
      });
    },
  };

  // The test sends the signals one after the other: each is ordered after the one before.
  let sender: number | null = null;
  for (const [k, s] of signalScript(c).entries()) {
    const id = occurrences.length;
    const index = s.index;
    const key = s.at + k / 1000;
    schedule(
      s.at,
      `signal ${s.v}`,
      true,
      () => {
        const w = line[s.name].shift();
        if (!w) return void mailbox[s.name].push({ v: s.v, key });
        w.done = true;
        w.resolve({ v: s.v, t: now });
      },
      key,
      sender,
    );
    occurrences[id].signal = index;
    sender = id;
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
    if (!ended || marked) return;
    marked = true;
    end = now;
    occurrences.push({ id: occurrences.length, time: now, parent: current, what: 'end' });
  };
  await tick();
  mark();
  while (queue.length) {
    queue.sort((x, y) => x.key - y.key || x.seq - y.seq);
    const e = queue.shift()!;
    if (ended && e.wait) continue; // dropped: run() returned
    now = Math.max(now, e.time);
    current = e.id;
    e.fire();
    await tick();
    mark();
  }
  if (!outcome) return { ...result(), invalid: 'run() never returns (a wait nothing answers)' };
  return result();

  function result(): PlainResult {
    if (end > maxUnits) invalid ??= `takes ${end} units (more than ${maxUnits})`;
    return {
      outcome: outcome ?? { trace: [], value: null },
      effects,
      end,
      invalid,
      occurrences,
      calls,
      tags,
    };
  }
}
