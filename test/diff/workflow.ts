/**
 * The durable run of a differential program: one @DurableWorkflow whose run() interprets the program
 * (its input) with the same interpreter as the plain run, over the engine's primitives: a @DurableStep,
 * an @IdempotentCommand at the world's target (lookup policy), ctx.sleep and ctx.waitForSignal.
 *
 * Time: the first step (`diff_begin`) takes the run's time 0 from the world (the test sends the
 * signals from it). A step or command called at virtual time t with duration d ends its body at
 * t0 + (t + d) · unitMs on the real clock, not d · unitMs after it was called: lateness (a commit, a
 * claim, a park) never adds up along a sequence, and a body run again after a takeover ends when the
 * first one would have. A timer is ctx.sleep(n · unitMs) as written.
 */
import { Injectable } from '@nestjs/common';
import {
  CommandContext,
  CommandLookup,
  currentRun,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  ChildRunError,
  RunContext,
  SignalTimeoutError,
  StepTimeoutError,
} from '../../src';
import { DiffHangs } from './hang-steps';
import { interpret, OpFailure, type Hooks, type Out, type Outcome, type Prims } from './interpret';
import { BEGUN, sendMark } from './marks';
import { hangEnd, UNIT_MS, type DiffInput } from './program';
import { getJson, post } from './world-client';

export const DIFF_KIND = 'diff-program';
export const DIFF_CHILD_KIND = 'diff-child';

interface LeafArgs {
  label: string;
  /** Virtual end (units): the body returns at t0 + end · unitMs. */
  end: number;
  d: number;
  t0: number;
  unitMs: number;
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A body: says when it was called, then lasts until its virtual end. A child's says it for its parent. */
async function body(kind: 'step' | 'cmd' | 'child', a: LeafArgs & { parent?: string }): Promise<string> {
  const runId = a.parent ?? currentRun()!.runId;
  const due = a.t0 + (a.end - a.d) * a.unitMs;
  await post('/exec', { runId, label: a.label, kind, due, pid: process.pid });
  const left = a.t0 + a.end * a.unitMs - Date.now();
  if (left > 0) await pause(left);
  return runId;
}

@Injectable()
export class DiffCalls implements CommandLookup {
  /** The run's time 0 (ms), as the world first saw it. */
  @DurableStep({ name: 'diff_begin' })
  async begin(): Promise<number> {
    return (await post<{ t0: number }>('/begin', { runId: currentRun()!.runId })).t0;
  }

  @DurableStep({ name: 'diff_step' })
  async step(a: LeafArgs): Promise<Out> {
    await body('step', a);
    return { v: `s:${a.label}`, t: a.end };
  }

  /** Keyed by its label ('/' is not a key character: a loop's item is `_<x>`). */
  @IdempotentCommand({
    name: 'diff_cmd',
    inDoubt: 'lookup',
    key: (a: LeafArgs) => a.label.replace(/\//g, '_'),
  })
  async cmd(a: LeafArgs, ctx?: CommandContext): Promise<Out> {
    const runId = await body('cmd', a);
    const result: Out = { v: `c:${a.label}`, t: a.end };
    return post<Out>('/effect', { runId, label: a.label, key: ctx!.idempotencyKey, result });
  }

  /** The body of a child run (DiffChild): a step of the child, reported as its parent's call. */
  @DurableStep({ name: 'diff_child_body' })
  async childBody(a: LeafArgs & { parent: string }): Promise<Out> {
    await body('child', a);
    return { v: `k:${a.label}`, t: a.end };
  }

  async lookupCommand(_command: string, key: string) {
    return getJson<{ found: true; result: unknown } | { found: false }>(
      `/effect?key=${encodeURIComponent(key)}`,
    );
  }
}

/** A signal's payload: its value and when (units) it was sent. */
export interface SignalPayload {
  v: string;
  at: number;
}

/** A child run: one step of `d` units. */
@DurableWorkflow(DIFF_CHILD_KIND, { maxAttempts: 20 })
export class DiffChild {
  constructor(private readonly calls: DiffCalls) {}

  run(input: LeafArgs & { parent: string }): Promise<Out> {
    return this.calls.childBody(input);
  }
}

/** The code a worker process runs: `old` (DIFF_CODE=old) takes a patch op's old path without asking. */
const code = () => (process.env.DIFF_CODE === 'old' ? 'old' : 'new');

/** Executions of run() in this process (each reports its catch and finally blocks as `<pid>:<n>`). */
let executions = 0;

@DurableWorkflow(DIFF_KIND, { maxAttempts: 20 })
export class DiffWorkflow {
  constructor(
    private readonly calls: DiffCalls,
    private readonly hangs: DiffHangs,
  ) {}

  async run(input: DiffInput, ctx: RunContext): Promise<Outcome> {
    const exec = `${process.pid}:${++executions}`;
    let seq = 0;
    const hooks: Hooks = {
      // The run stopped for a cancel or a lost lease (not a park: RunSuspended) when the block ran.
      mark: (what) =>
        sendMark(ctx.runId, {
          exec,
          seq: seq++,
          what,
          stopped: ctx.signal.aborted && (ctx.signal.reason as Error)?.name !== 'RunSuspended',
        }),
    };
    hooks.mark!(BEGUN); // every execution is listed, also one that runs no block
    const t0 = await this.calls.begin();
    const leaf = (label: string, d: number, at: number): LeafArgs => ({
      label,
      end: at + d,
      d,
      t0,
      unitMs: input.unitMs,
    });
    const prims: Prims = {
      step: (label, d, at) => this.calls.step(leaf(label, d, at)),
      cmd: (label, d, at) => this.calls.cmd(leaf(label, d, at)),
      sleep: (_label, n, at) => ctx.sleep(n * input.unitMs).then(() => ({ v: 'slept', t: at + n })),
      wait: (_label, name, timeout, at) =>
        ctx
          .waitForSignal<SignalPayload>(name, timeout === null ? {} : { timeoutMs: timeout * input.unitMs })
          .then(
            (p) => ({ v: p.v, t: Math.max(at, p.at) }),
            (e: unknown) => {
              if (e instanceof SignalTimeoutError) throw new OpFailure('timeout', at + timeout!);
              throw e;
            },
          ),
      child: (label, d, timeout, at) =>
        ctx
          .child<Out>(
            DIFF_CHILD_KIND,
            { ...leaf(label, d, at), parent: ctx.runId },
            timeout === null ? {} : { timeoutMs: timeout * input.unitMs },
          )
          .catch((e: unknown) => {
            if (e instanceof ChildRunError && e.childStatus === 'timed_out')
              throw new OpFailure('timeout', at + timeout!);
            throw e;
          }),
      hang: (label, op, at) => {
        if (input.unitMs !== UNIT_MS)
          throw new Error(`a hang op needs ${UNIT_MS} ms units (its steps' timeouts)`);
        const { fails, returns } = hangEnd(op, at);
        const due = t0 + at * input.unitMs;
        const thenEnd = returns;
        return this.hangs
          .of(
            op.timeout,
            op.attempts,
          )({ label, due, deaf: op.deaf, thenEnd, t0, unitMs: input.unitMs })
          .then(
            (v) => ({ v, t: returns! }),
            (e: unknown) => {
              if (e instanceof StepTimeoutError) throw new OpFailure('timeout', fails!);
              throw e;
            },
          );
      },
      patched: (label) => code() === 'new' && ctx.patched(`p${label.replace(/\//g, '_')}`),
    };
    return interpret(input.ops, prims, input.mutation, hooks);
  }
}

export const DIFF_PROVIDERS = [DiffCalls, DiffHangs, DiffWorkflow, DiffChild];
