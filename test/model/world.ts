/**
 * The model's ground truth, in process memory and shared by every worker app of a case: the fake
 * targets (what really happened outside), every value a consumer in a workflow saw, every execution
 * of a step body, and what the pause hook observed. A new one for each case (inNewWorld).
 */

import { AsyncLocalStorage } from 'node:async_hooks';
import { sendOverWire } from './wire-vendor';

/** Fencing tokens as one number, ordered as (timeline, epoch) pairs are (epochs stay below TOKEN_BASE). */
export const TOKEN_BASE = 1_000_000;
/** A claim's token (a run context, a command's fence, a pause point) as one number. */
export function claimToken(c: { epoch: number; timeline?: number }): number {
  return (c.timeline ?? 0) * TOKEN_BASE + c.epoch;
}
/** The WAL timeline of a token. */
export const timelineOf = (token: number): number => Math.floor(token / TOKEN_BASE);
/** A token as a message shows it: `epoch 3 (timeline 1)`. */
export const showToken = (token: number): string =>
  `epoch ${token % TOKEN_BASE} (timeline ${timelineOf(token)})`;
/** `runId:token`: one claim of a run (the fault plan's tags). */
export const claimTag = (runId: string, c: { epoch: number; timeline?: number }): string =>
  `${runId}:${claimToken(c)}`;

/** One call a target received. */
export interface TargetCall {
  key: string;
  /** The fencing token of the claim that sent it (claimToken). */
  token: number;
  runId: string;
  op: string;
  amount: number;
  /** Applied as an effect (false: a repeat the deduplicating target answered from memory). */
  applied: boolean;
}

/**
 * An in-process vendor. `dedup`: applies once per idempotency key and answers repeats with the first
 * result. Otherwise every call is an effect (a charge that does not know keys), but it still
 * remembers which keys it saw, so a lookup can answer.
 */
export class FakeVendor {
  /**
   * Every vendor by id, so a request reaches the vendor of the case that sent it: a body still in
   * flight when its case ended (a worker whose close timed out) must not land in the next case's world.
   */
  private static readonly all = new Map<number, WeakRef<FakeVendor>>();
  private static ids = 0;
  readonly id = ++FakeVendor.ids;
  readonly calls: TargetCall[] = [];
  private readonly results = new Map<string, unknown>();
  private n = 0;

  constructor(readonly dedup: boolean) {
    FakeVendor.all.set(this.id, new WeakRef(this));
  }

  /** The vendor with this id, if its case is still reachable. */
  static byId(id: number): FakeVendor | undefined {
    return FakeVendor.all.get(id)?.deref();
  }

  /** Keys whose first call already failed (a 504 happens once per key). */
  private readonly failedOnce = new Set<string>();

  /**
   * A command body's charge: the body reaches the `in-body` point (a fault may freeze it there, past
   * its lease), then its request leaves over a socket (test/model/wire-vendor.ts) and is received below.
   */
  async apply(...[ctx, args]: Parameters<FakeVendor['receive']>): Promise<unknown> {
    await tinyDelay();
    // The case's pause point, only for its own vendors (a late body of an ended case passes by).
    const own = world.dedup === this || world.plain === this;
    if (own) await world.inBody?.(ctx.fence, `command:${this.dedup ? 'dedup' : 'plain'}`);
    return sendOverWire(this, ctx, args);
  }

  /** The vendor's side of a charge (what its server does with a request). */
  async receive(
    ctx: { idempotencyKey: string; fence: { runId: string; epoch: number; timeline: number } },
    args: {
      runId: string;
      op: string;
      amount: number;
      fail?: 'lost' | 'applied' | 'refused';
      drawn?: string;
    },
  ): Promise<unknown> {
    const key = ctx.idempotencyKey;
    const { fail, drawn, ...rest } = args;
    const call = { ...rest, token: claimToken(ctx.fence) };
    if (fail === 'refused') throw Object.assign(new Error('refused by the target'), { retryable: false });
    if (fail === 'lost' && !this.failedOnce.has(key)) {
      this.failedOnce.add(key);
      throw new Error('504 Gateway Timeout (never reached the target)');
    }
    const result = await this.applyOnce(key, call, drawn);
    if (fail === 'applied' && !this.failedOnce.has(key)) {
      this.failedOnce.add(key);
      throw new Error('504 Gateway Timeout (the target applied it)');
    }
    return result;
  }

  private async applyOnce(
    key: string,
    args: { runId: string; op: string; amount: number; token: number },
    drawn: string | undefined,
  ): Promise<unknown> {
    const seen = this.results.get(key);
    if (this.dedup && seen !== undefined) {
      this.calls.push({ key, ...args, applied: false });
      return seen;
    }
    const result = {
      op: args.op,
      amount: args.amount,
      chargeId: `${this.dedup ? 'd' : 'p'}_${++this.n}`,
      ...(drawn ? { drawn } : {}),
    };
    this.calls.push({ key, ...args, applied: true });
    if (seen === undefined) this.results.set(key, result);
    return result;
  }

  async lookup(key: string): Promise<{ found: true; result: unknown } | { found: false }> {
    await tinyDelay();
    return this.results.has(key) ? { found: true, result: this.results.get(key) } : { found: false };
  }

  /** Synchronous peek for the operator and the checker. */
  peek(key: string): unknown {
    return this.results.get(key);
  }

  effects(key: string): number {
    return this.calls.filter((c) => c.key === key && c.applied).length;
  }
}

/** A value a consumer in the workflow body saw. */
export interface Observation {
  runId: string;
  op: string;
  /** The claim's fencing token (claimToken). */
  epoch: number;
  /** Global order of observations and pause-point hits (for "was it written after I saw it"). */
  seq: number;
  value: unknown;
}

/** One execution of a step body. */
export interface StepExecution {
  runId: string;
  op: string;
  /** The claim's fencing token (claimToken). */
  epoch: number;
  n: number;
}

/** One pause point reached (from the hook). */
export interface HookHit {
  seq: number;
  point: string;
  detail?: string;
  runId: string;
  /** The claim's fencing token (claimToken). */
  epoch: number;
  workerId: string;
}

export class World {
  dedup = new FakeVendor(true);
  plain = new FakeVendor(false);
  observations: Observation[] = [];
  executions: StepExecution[] = [];
  hits: HookHit[] = [];
  /** Runs (by id) the operator retried, with how many times. */
  retries = new Map<string, number>();
  /**
   * The workflow code deployed now: false, the code before its `patch` ops were written (their old path
   * only); true, the code with `ctx.patched`. Each claim reads it once, when its run() begins (a process
   * runs one version), so a run parked on v1 resumes on v2.
   */
  deployed = false;
  /**
   * Values command bodies drew from the context, by idempotency key (every send must draw the same),
   * each with the token of the claim that first drew it.
   */
  drawn = new Map<string, Map<string, number>>();
  /**
   * A real lost WAL suffix in this case (the harness promoted a standby behind the primary): the new
   * primary's timeline. What claims of older timelines committed after the fork may be gone.
   */
  lostSuffix: { timeline: number } | null = null;
  /** The case's `in-body` pause point (FaultPlan.inBody): a command body, before its request. */
  inBody:
    | ((fence: { runId: string; epoch: number; timeline: number }, detail: string) => Promise<void> | void)
    | null = null;
  private seq = 0;
  private counter = 0;

  nextSeq(): number {
    return ++this.seq;
  }
  /** A number unique to one execution of one step body, so a re-executed step is detectable. */
  nextExecution(): number {
    return ++this.counter;
  }
  /** A value a consumer in run `ctx` saw (its claim's token is the observation's `epoch`). */
  observe(ctx: { runId: string; epoch: number; timeline: number }, op: string, value: unknown): void {
    this.observations.push({ runId: ctx.runId, op, epoch: claimToken(ctx), seq: this.nextSeq(), value });
  }
}

/** The case whose code is running: set for a case's whole run, its workers' boots included. */
const caseScope = new AsyncLocalStorage<World>();
let latest = new World();

/**
 * The world of the case whose code reads it: the case's workers are booted inside its scope, so their
 * workflow code (timers, claims, listeners, all begun there) keeps its own case's world even when it
 * runs on after the case (a worker whose close timed out) and writes nothing into the next case's.
 * Outside every scope, the latest case's.
 */
export const world: World = new Proxy({} as World, {
  get(_, prop) {
    const w = caseScope.getStore() ?? latest;
    const v = Reflect.get(w, prop, w) as unknown;
    return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(w) : v;
  },
  set: (_, prop, value) => Reflect.set(caseScope.getStore() ?? latest, prop, value),
});

/** A new world for a case, and `fn` run in its scope (see `world`). */
export function inNewWorld<T>(fn: (world: World) => Promise<T>): Promise<T> {
  latest = new World();
  const w = latest;
  return caseScope.run(w, () => fn(w));
}

/** 0–3 ms, so the completion order of a fan-out varies from one execution to the next. */
export function tinyDelay(): Promise<void> {
  const ms = Math.floor(Math.random() * 4);
  return new Promise((r) => setTimeout(r, ms));
}
