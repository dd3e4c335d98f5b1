/** The interpreter's types (interpret.ts): values, primitives, outcome, hooks. */
import type { Op, SignalName } from './program';

/** A hang op (program.ts). */
export type HangOp = Extract<Op, { t: 'hang' }>;

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
  /**
   * A step whose body hangs (program.ts): rejects with OpFailure('timeout', when its last attempt timed
   * out), resolves when a second attempt returns, or never settles (no timeout).
   */
  hang(label: string, op: HangOp, at: number): Promise<Out>;
  /** ctx.patched(id) of the patch op `label` (the old code answers false without asking; `old`: its path). */
  patched(label: string, old: Op): boolean;
}

/** What the durable run returns and the plain run computes. */
export interface Outcome {
  trace: string[];
  value: Json;
  /** The workflow-local counters: catch blocks and finally blocks run (by this execution). */
  counts: { catch: number; finally: number };
}

/** Hooks: a composite op settled (the plain run's coverage); a catch or finally block ran (`<label>#catch`). */
export interface Hooks {
  settled?(op: Op, label: string, failed: boolean, v: Json): void;
  mark?(what: string): void;
  /** A try block began (its finally block's mark ends it). */
  enter?(label: string): void;
}

/** What an error is called in the trace: the failure's reason, or the engine error's name. */
export function why(e: unknown): string {
  if (e instanceof OpFailure) return e.why;
  const err = e as { name?: string; message?: string };
  return `error:${err?.name ?? 'unknown'}:${err?.message ?? String(e)}`;
}
