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
import { OpFailure, why, type Hooks, type Json, type Out, type Outcome, type Prims } from './interpret-types';
import { childLabel, itemLabel, type Mutation, type Op } from './program';

export { OpFailure, why } from './interpret-types';
export type { Hooks, Json, Out, Outcome, Prims } from './interpret-types';

const LEAVES = ['step', 'cmd', 'sleep', 'wait', 'child', 'hang'];
const tOf = (e: unknown, at: number) => (e instanceof OpFailure ? e.t : at);
const latest = (ts: number[], at: number) => Math.max(at, ...ts);

export async function interpret(
  ops: Op[],
  prims: Prims,
  mutation?: Mutation,
  hooks?: Hooks,
): Promise<Outcome> {
  const trace: string[] = [];
  // Workflow-local counters, as `let n = 0, m = 0` in run(): catch and finally blocks run.
  const counts = { catch: 0, finally: 0 };
  const mark = (what: string) => {
    trace.push(what);
    hooks?.mark?.(what);
  };

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
      case 'hang':
        return prims.hang(label, op, at);
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
        hooks?.enter?.(label);
        try {
          const o = await run(op.body, childLabel(label, 0), at);
          return { v: { ok: o.v }, t: o.t };
        } catch (e) {
          counts.catch++;
          mark(`${label}#catch`);
          if (op.rethrow) throw e;
          return { v: { caught: why(e) }, t: tOf(e, at) };
        } finally {
          counts.finally++;
          mark(`${label}#finally`);
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
  return { trace: [...trace], value: values, counts: { ...counts } };
}
