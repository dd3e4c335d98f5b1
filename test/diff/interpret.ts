/**
 * The one interpreter of a differential program, in plain JavaScript: `Promise.race`, `any`, `all`,
 * `allSettled`, sequences, loops and try/catch over the primitives (step, command, sleep, signal wait,
 * child run, `ctx.patched` in a loop).
 * Both runs use it: the plain run with primitives on a virtual clock (plain.ts), the durable run inside a
 * @DurableWorkflow with the engine's (workflow.ts). Every op, when it settles, appends a line to the
 * trace (`<label>=<value>` or `<label>!<why>`); the outcome is the trace as run() returns plus the
 * value (or the error) of the program.
 *
 * Each value carries `t`, the virtual time (units) at which it settled, derived from the data alone (a
 * step called at t ends at t + d, a signal at its arrival, `all` at the latest of its parts, ...). The
 * durable run uses it to end each step at its virtual time on the real clock (so lateness never adds up
 * along a sequence); the plain run checks it against its clock.
 */
import { childLabel, itemLabel, type Mutation, type Op, type SignalName } from './program';

export type Json = null | string | number | boolean | Json[] | { [k: string]: Json };

export interface Out {
  v: Json;
  t: number;
}

/** A rejection of the program: a signal wait's timeout, or `any` with every part rejected. */
export class OpFailure extends Error {
  constructor(
    readonly why: string,
    readonly t: number,
  ) {
    super(why);
    this.name = 'OpFailure';
  }
}

export interface Prims {
  step(label: string, d: number, at: number): Promise<Out>;
  cmd(label: string, d: number, at: number): Promise<Out>;
  sleep(label: string, n: number, at: number): Promise<Out>;
  /** Rejects with OpFailure('timeout', at + timeout) when the timeout passes first. */
  wait(label: string, name: SignalName, timeout: number | null, at: number): Promise<Out>;
  /** A child run of `d` units, waited for; rejects with OpFailure('timeout', at + timeout). */
  child(label: string, d: number, timeout: number | null, at: number): Promise<Out>;
  /** ctx.patched(id) of the patch op `label` (the old code answers false without asking; `old`: its path). */
  patched(label: string, old: Op): boolean;
}

/** What the durable run returns and the plain run computes. */
export interface Outcome {
  trace: string[];
  value: Json;
}

/** Coverage hooks (the plain run's): a composite op settled. */
export interface Hooks {
  settled?(op: Op, label: string, failed: boolean, v: Json): void;
}

/** What an error is called in the trace: the failure's reason, or the engine error's name. */
export function why(e: unknown): string {
  if (e instanceof OpFailure) return e.why;
  const err = e as { name?: string; message?: string };
  return `error:${err?.name ?? 'unknown'}:${err?.message ?? String(e)}`;
}

const LEAVES = ['step', 'cmd', 'sleep', 'wait', 'child'];
const tOf = (e: unknown, at: number) => (e instanceof OpFailure ? e.t : at);
const latest = (ts: number[], at: number) => Math.max(at, ...ts);

export async function interpret(
  ops: Op[],
  prims: Prims,
  mutation?: Mutation,
  hooks?: Hooks,
): Promise<Outcome> {
  const trace: string[] = [];

  function run(op: Op, label: string, at: number): Promise<Out> {
    const p = exec(op, label, at).then(
      (o) => {
        trace.push(`${label}=${JSON.stringify(o.v)}`);
        if (!LEAVES.includes(op.t)) hooks?.settled?.(op, label, false, o.v);
        return o;
      },
      (e: unknown) => {
        trace.push(`${label}!${why(e)}`);
        if (!LEAVES.includes(op.t)) hooks?.settled?.(op, label, true, why(e));
        throw e;
      },
    );
    p.catch(() => undefined); // a race's loser may reject with nobody listening: not unhandled
    return p;
  }

  async function exec(op: Op, label: string, at: number): Promise<Out> {
    switch (op.t) {
      case 'step':
        return prims.step(label, op.d, at);
      case 'cmd':
        return prims.cmd(label, op.d, at);
      case 'sleep':
        // Mutation: the timer is ignored (the sleep resolves at once).
        if (mutation === 'sleep-skip') return { v: 'slept', t: at };
        return prims.sleep(label, op.n, at);
      case 'wait':
        return prims.wait(label, op.name, op.timeout, at);
      case 'child':
        return prims.child(label, op.d, op.timeout, at);
      case 'patch': {
        // for (const x of items) ctx.patched(id) ? await a : await b; a at `<item>.0`, b at `<item>.1`.
        const vs: Json[] = [];
        let t = at;
        for (let x = 0; x < op.items; x++) {
          const item = itemLabel(label, x);
          const o = prims.patched(label, op.b)
            ? await run(op.a, childLabel(item, 0), t)
            : await run(op.b, childLabel(item, 1), t);
          vs.push(o.v);
          t = o.t;
        }
        return { v: vs, t };
      }
      case 'seq': {
        let last: Out = { v: null, t: at };
        for (let i = 0; i < op.ops.length; i++) last = await run(op.ops[i], childLabel(label, i), last.t);
        return last;
      }
      case 'all': {
        const outs = await Promise.all(op.ops.map((o, i) => run(o, childLabel(label, i), at)));
        return {
          v: outs.map((o) => o.v),
          t: latest(
            outs.map((o) => o.t),
            at,
          ),
        };
      }
      case 'race': {
        const parts = op.ops.map((o, i) => run(o, childLabel(label, i), at));
        if (mutation === 'race-as-all') {
          // Mutation: waits for every part, then answers with the first one's value.
          const outs = await Promise.all(parts);
          return {
            v: outs[0].v,
            t: latest(
              outs.map((o) => o.t),
              at,
            ),
          };
        }
        return Promise.race(parts);
      }
      case 'any': {
        const parts = op.ops.map((o, i) => run(o, childLabel(label, i), at));
        if (mutation === 'any-as-race') return Promise.race(parts);
        return Promise.any(parts).catch((e: AggregateError) => {
          throw new OpFailure(
            'all-rejected',
            latest(
              e.errors.map((x) => tOf(x, at)),
              at,
            ),
          );
        });
      }
      case 'allSettled': {
        const rs = await Promise.allSettled(op.ops.map((o, i) => run(o, childLabel(label, i), at)));
        return {
          v: rs.map((r): Json => (r.status === 'fulfilled' ? { ok: r.value.v } : { err: why(r.reason) })),
          t: latest(
            rs.map((r) => (r.status === 'fulfilled' ? r.value.t : tOf(r.reason, at))),
            at,
          ),
        };
      }
      case 'loop': {
        const xs = Array.from({ length: op.items }, (_, x) => x);
        if (op.par) {
          const outs = await Promise.all(xs.map((x) => run(op.body, itemLabel(label, x), at)));
          return {
            v: outs.map((o) => o.v),
            t: latest(
              outs.map((o) => o.t),
              at,
            ),
          };
        }
        const vs: Json[] = [];
        let t = at;
        for (const x of xs) {
          const o = await run(op.body, itemLabel(label, x), t);
          vs.push(o.v);
          t = o.t;
        }
        return { v: vs, t };
      }
      case 'try':
        try {
          const o = await run(op.body, childLabel(label, 0), at);
          return { v: { ok: o.v }, t: o.t };
        } catch (e) {
          return { v: { caught: why(e) }, t: tOf(e, at) };
        }
    }
  }

  // run(): the top-level ops one after the other, each in a try/catch of its own (a timeout there does
  // not end the program).
  let t = 0;
  const values: Json[] = [];
  for (let i = 0; i < ops.length; i++)
    try {
      const o = await run(ops[i], String(i), t);
      values.push(o.v);
      t = o.t;
    } catch (e) {
      values.push({ caught: why(e) });
      t = tOf(e, t);
    }
  return { trace: [...trace], value: values };
}
