/**
 * The model workflow: interprets a generated program (its run input) with the public API only, and
 * records in `world` every value a consumer saw and every execution of a step body.
 */
import { Injectable } from '@nestjs/common';
import {
  ChildRunError,
  CommandContext,
  CommandFailedError,
  CommandLookup,
  currentRun,
  NonRetryableError,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  RunCancelInfo,
  RunContext,
  SignalTimeoutError,
} from '../../src';
import { Leaf, RuleOp, ruleWaits } from './grammar';
import type { CmdName, CmdSpec, Program, StepKind } from './program';
import { claimToken, tinyDelay, world } from './world';

export const MODEL_KIND = 'model-program';
/** The budget every model step draws on: 3 calls in any 250 ms, so that cases park on it. */
export const MODEL_BUDGET = 'model-calls';
export const MODEL_BUDGET_LIMITS = { requests: 3, periodMs: 250 };

interface StepArgs {
  op: string;
  nul?: 'none' | 'result' | 'progress';
  /** A map with these keys, in this order (`keys`), or a list of them (`elems`), in the output. */
  keys?: string[];
  over?: 'keys' | 'elems';
  /** Report progress once, as a long loop does. */
  progress?: boolean;
}
export interface StepOutput {
  op: string;
  n: number;
  amount: number;
  note?: string;
  map?: Record<string, number>;
  list?: string[];
}
interface CmdArgs {
  runId: string;
  op: string;
  amount: number;
  approval: boolean;
  fail?: 'lost' | 'applied' | 'refused';
  /** Keyed by `op` (the `key` option), not by position. */
  keyed?: boolean;
}

/** A step body: its value is derived from the args and a number unique to this execution. */
async function stepBody(a: StepArgs): Promise<StepOutput> {
  const ctx = currentRun()!;
  const n = world.nextExecution();
  world.executions.push({ runId: ctx.runId, op: a.op, epoch: claimToken(ctx), n });
  await tinyDelay();
  const out: StepOutput = { op: a.op, n, amount: (n % 97) + 1 };
  if (a.nul === 'result') out.note = `nul\u0000${n}`;
  if (a.nul === 'progress') await ctx.progress(0, { note: `nul\u0000${n}` });
  if (a.progress) await ctx.progress(0, { upTo: n });
  if (a.over === 'keys') out.map = Object.fromEntries(a.keys!.map((k, i) => [k, n + i]));
  if (a.over === 'elems') out.list = [...a.keys!];
  return out;
}

@Injectable()
export class ModelSteps {
  /** A step that fails: retried in its claim (`step-transient`), or not (`step-final`). */
  @DurableStep({ name: 'flaky_step', retry: { maxAttempts: 2, initialDelayMs: 1, maxDelayMs: 2 } })
  async flaky(a: { op: string; mode: 'step-transient' | 'step-final' }): Promise<never> {
    await tinyDelay();
    if (a.mode === 'step-final')
      throw Object.assign(new NonRetryableError(`declined ${a.op}`), { code: 'E_DECLINED' });
    throw new Error(`upstream 503 for ${a.op}`);
  }

  /** A step whose body calls a command: refused (a step is re-run as a whole), the run fails. */
  @DurableStep({ name: 'calls_command' })
  async callsCommand(a: { runId: string; op: string }): Promise<unknown> {
    return this.cmds().dedup_lookup({ runId: a.runId, op: `${a.op}c`, amount: 1, approval: false });
  }
  /** Set by ModelCommands (each needs the other). */
  cmds!: () => ModelCommands;

  @DurableStep({ name: 'compute_step', kind: 'compute' })
  compute(a: StepArgs): Promise<StepOutput> {
    return stepBody(a);
  }
  @DurableStep({ name: 'model_step', kind: 'model', budget: MODEL_BUDGET })
  model(a: StepArgs): Promise<StepOutput> {
    return stepBody(a);
  }
  @DurableStep({ name: 'tool_step', kind: 'tool' })
  tool(a: StepArgs): Promise<StepOutput> {
    return stepBody(a);
  }
  /** Emits `s:<op>` before and after its work: an attempt cut off between them leaves the first. */
  @DurableStep({ name: 'emitting_step', kind: 'tool' })
  async emitting(a: StepArgs): Promise<StepOutput> {
    await currentRun()!.emit(`s:${a.op}`, { part: 1 });
    const out = await stepBody(a);
    await currentRun()!.emit(`s:${a.op}`, { part: 2 });
    return out;
  }
}

const approval = (a: CmdArgs) => a.approval;
/** A command's own key: its op id, when the program says so. */
const key = (a: CmdArgs) => (a.keyed ? a.op : undefined);

@Injectable()
export class ModelCommands implements CommandLookup {
  constructor(private readonly steps: ModelSteps) {
    steps.cmds = () => this;
  }

  /** Draws a value from the context inside its body and sends it: every send of a key draws the same. */
  @IdempotentCommand({ name: 'value_cmd', inDoubt: 'retry-with-key' })
  value_cmd(a: CmdArgs, ctx?: CommandContext) {
    const drawn = currentRun()!.uuid();
    const seen = world.drawn.get(ctx!.idempotencyKey) ?? new Map<string, number>();
    if (!seen.has(drawn)) world.drawn.set(ctx!.idempotencyKey, seen.set(drawn, claimToken(ctx!.fence)));
    return world.dedup.apply(ctx!, { ...a, drawn });
  }

  /** Calls a step from its body (a plain call: the command's result is what is recorded). */
  @IdempotentCommand({ name: 'checked_cmd', inDoubt: 'lookup' })
  async checked_cmd(a: CmdArgs, ctx?: CommandContext) {
    const check = await this.steps.compute({ op: `${a.op}n` });
    return world.dedup.apply(ctx!, { ...a, amount: a.amount + (check.n > 0 ? 0 : 1) });
  }

  @IdempotentCommand({ name: 'dedup_lookup', inDoubt: 'lookup', requiresApproval: approval, key })
  dedup_lookup(a: CmdArgs, ctx?: CommandContext) {
    return world.dedup.apply(ctx!, a);
  }
  @IdempotentCommand({ name: 'dedup_retry', inDoubt: 'retry-with-key', requiresApproval: approval, key })
  dedup_retry(a: CmdArgs, ctx?: CommandContext) {
    return world.dedup.apply(ctx!, a);
  }
  @IdempotentCommand({ name: 'dedup_manual', inDoubt: 'manual', requiresApproval: approval, key })
  dedup_manual(a: CmdArgs, ctx?: CommandContext) {
    return world.dedup.apply(ctx!, a);
  }
  @IdempotentCommand({ name: 'plain_lookup', inDoubt: 'lookup', requiresApproval: approval, key })
  plain_lookup(a: CmdArgs, ctx?: CommandContext) {
    return world.plain.apply(ctx!, a);
  }
  @IdempotentCommand({ name: 'plain_manual', inDoubt: 'manual', requiresApproval: approval, key })
  plain_manual(a: CmdArgs, ctx?: CommandContext) {
    return world.plain.apply(ctx!, a);
  }
  lookupCommand(command: string, key: string) {
    return vendorOf(command).lookup(key);
  }
}

/** The vendor a command name goes to. */
export const vendorOf = (cmd: string) => (cmd.startsWith('plain') ? world.plain : world.dedup);

@DurableWorkflow(MODEL_KIND, { maxAttempts: 8 })
export class ModelWorkflow {
  constructor(
    private readonly steps: ModelSteps,
    private readonly cmds: ModelCommands,
  ) {}

  async run(input: Program, ctx: RunContext): Promise<Record<string, unknown>> {
    let amount = 0;
    const v2 = world.deployed; // the code version of this claim (see World.deployed)
    const out: Record<string, unknown> = {};
    for (const op of input.ops) {
      // Coverage: an op entered by two epochs ran live in one and was replayed by the other.
      world.observe(ctx, `${op.id}@`, { entered: true });
      if (op.t === 'step') amount = (await this.step(ctx, op.kind, { op: op.id, nul: op.nul })).amount;
      else if (op.t === 'cmd') out[op.id] = await this.command(ctx, op, op.id, amount);
      else if (op.t === 'fan') {
        // The pattern of the brief: each branch awaits its step, then calls a command with its output.
        const results = await Promise.all(
          op.branches.map(async (b) =>
            this.command(ctx, b, b.id, (await this.step(ctx, b.kind, { op: `${b.id}s` })).amount),
          ),
        );
        out[op.id] = results.length;
      } else if (op.t === 'wait') out[op.id] = await this.wait(ctx, op.id, op.timeoutMs);
      else if (op.t === 'sleep') await ctx.sleep(op.ms);
      else if (op.t === 'clock') {
        const v = { now: ctx.now().toISOString(), uuid: ctx.uuid() };
        world.observe(ctx, op.id, v);
        out[op.id] = v.uuid;
      } else if (op.t === 'dangling') {
        // Never awaited: run() returns with it live. (The step's own promise is marked handled by the
        // engine; a helper of the workflow's own that awaits it would reject unhandled.)
        void this.steps[op.kind]({ op: `${op.id}s` });
        return out;
      } else if (op.t === 'continue') {
        // The next generation runs the op's calls, carrying what this one returned so far (and the rest
        // of its input: a limited run's key, a scheduled run's tick).
        await ctx.continueAsNew({ ...input, ops: op.ops, carried: { ...input.carried, ...out } });
      } else if (op.t === 'patch') {
        const next = v2 && ctx.patched(op.id);
        world.observe(ctx, `${op.id}p`, { v2, next });
        amount = (await this.step(ctx, 'compute', { op: `${op.id}${next ? 'n' : 'o'}s` })).amount;
      } else amount = await this.rule(ctx, op, out, amount);
    }
    return input.carried ? { ...input.carried, ...out } : out;
  }

  /**
   * The cleanup after a cancel: a command whose amount is how many commands run() had completed (read
   * from the cancel info, so every resume of the cleanup sends the same), then a step whose arguments
   * carry a value drawn in the cleanup, and a loop over its result's keys.
   */
  async onCancel(_input: Program, ctx: RunContext, cancel: RunCancelInfo): Promise<void> {
    world.observe(ctx, 'cleanup@', { entered: true });
    const paid = cancel.completed.filter((c) => c.name.startsWith('command:') && !c.failed).length;
    await this.command(
      ctx,
      { cmd: 'dedup_lookup', approval: false, decision: 'approve', resolution: 'retry' },
      'cleanupc',
      paid,
    );
    // A value drawn in the cleanup, then a loop over the keys of a result: a resume must draw the same
    // (else the step's arguments differ from its record and the replay check says so).
    const ref = ctx.uuid().slice(0, 8);
    const out = await this.step(ctx, 'compute', { op: 'cleanups', keys: [ref, 'b', 'a'], over: 'keys' });
    for (const k of Object.keys(out.map!)) world.observe(ctx, `cleanup:${k}@`, { entered: true });
  }

  /** One op of the grammar (issue 19); returns the amount the next command sends. */
  private async rule(
    ctx: RunContext,
    op: RuleOp,
    out: Record<string, unknown>,
    amount: number,
  ): Promise<number> {
    switch (op.t) {
      case 'loop': {
        const r = await this.step(ctx, op.kind, { op: `${op.id}s`, keys: op.keys, over: op.over });
        const items = op.over === 'keys' ? Object.keys(r.map!) : r.list!;
        for (const k of items)
          amount = (await this.step(ctx, op.kind, { op: `${op.id}k${k}s`, progress: true })).amount;
        out[op.id] = items.join(',');
        return amount;
      }
      case 'branch': {
        const yes =
          op.on === 'result'
            ? (await this.step(ctx, 'compute', { op: `${op.id}s` })).n % 2 === 0
            : ctx.random() < 0.5;
        out[op.id] = await this.leaf(
          ctx,
          yes ? op.then : op.otherwise,
          yes ? `${op.id}t` : `${op.id}f`,
          amount,
        );
        return amount;
      }
      case 'try':
        out[op.id] = await this.tryCall(ctx, op, amount);
        return amount;
      case 'settle': {
        const calls = op.branches.map((b, j) => this.leaf(ctx, b, `${op.id}b${j}`, amount));
        if (op.failing) calls.push(this.steps.flaky({ op: `${op.id}x`, mode: 'step-final' }));
        if (op.mode === 'allSettled')
          out[op.id] = (await Promise.allSettled(calls)).map((s) => s.status).join(',');
        else {
          out[op.id] = await Promise.race(calls).then(
            () => 'fulfilled',
            (e: Error) => `rejected:${e.name}`,
          );
          await Promise.allSettled(calls); // no call is left live when run() returns
        }
        return amount;
      }
      case 'nested':
        if (op.how === 'cmd-in-step')
          out[op.id] = await this.steps.callsCommand({ runId: ctx.runId, op: `${op.id}s` });
        else
          out[op.id] = await this.observeCmd(ctx, `${op.id}n`, () =>
            this.cmds.checked_cmd(this.args(ctx, `${op.id}n`, amount)),
          );
        return amount;
      case 'cmdvalue':
        out[op.id] = await this.observeCmd(ctx, `${op.id}v`, () =>
          this.cmds.value_cmd(this.args(ctx, `${op.id}v`, amount)),
        );
        return amount;
      case 'late': {
        // The step's own (engine-handled) promise, held while another call is awaited.
        const first = this.steps[op.kind]({ op: `${op.id}s` });
        const between = await this.leaf(ctx, op.between, `${op.id}m`, amount);
        const v = await first;
        world.observe(ctx, `${op.id}s`, v);
        out[op.id] = { first: v.op, between: between === null ? null : 'done' };
        return amount;
      }
      case 'sigloop':
        for (const w of ruleWaits(op)) out[w] = await this.wait(ctx, w, op.timeoutMs);
        return amount;
      case 'child':
        out[op.id] = await this.child(ctx, op);
        return amount;
      case 'patch':
        return amount; // handled in run(): it needs the claim's code version
      case 'emit':
        if (op.where === 'body') await ctx.emit(op.id, { op: op.id });
        else if (op.where === 'step') amount = (await this.step(ctx, 'emitting', { op: `${op.id}s` })).amount;
        else {
          const [, v] = await Promise.all([
            ctx.emit(`${op.id}a`, { op: op.id }),
            this.step(ctx, 'compute', { op: `${op.id}s` }),
            ctx.emit(`${op.id}b`, { op: op.id }),
          ]);
          amount = v.amount;
        }
        return amount;
      case 'dangling':
      case 'continue':
        return amount; // handled in run(): it ends the program
    }
  }

  /** A child op: what the parent saw of its child run(s), observed as `<id>c`. */
  private async child(ctx: RunContext, op: Extract<RuleOp, { t: 'child' }>): Promise<unknown> {
    const call = (suffix: string, mode: ChildInput['mode'], timeoutMs?: number) =>
      ctx.child<ChildOutput>(
        MODEL_CHILD_KIND,
        { op: `${op.id}${suffix}`, mode, parent: ctx.runId },
        { timeoutMs },
      );
    const seen = (v: unknown) => (world.observe(ctx, `${op.id}c`, v), v);
    switch (op.how) {
      case 'await':
        return seen([await call('a', 'ok')]);
      case 'fan':
        return seen(await Promise.all([call('a', 'ok'), call('b', 'ok')]));
      case 'detached':
        return seen({
          started: (
            await ctx.startChild(MODEL_CHILD_KIND, { op: `${op.id}a`, mode: 'ok', parent: ctx.runId })
          ).kind,
        });
      default:
        try {
          return seen([
            await call('a', op.how === 'fail' ? 'fail' : 'stall', op.how === 'timeout' ? 30 : undefined),
          ]);
        } catch (err) {
          if (!(err instanceof ChildRunError)) throw err;
          return seen({ caught: err.childStatus });
        }
    }
  }

  private args(ctx: RunContext, op: string, amount: number, fail?: CmdArgs['fail']): CmdArgs {
    return { runId: ctx.runId, op, amount, approval: false, ...(fail ? { fail } : {}) };
  }

  /** A step or a command of a rule. */
  private async leaf(ctx: RunContext, l: Leaf, id: string, amount: number): Promise<unknown> {
    return l.c === 'step' ? this.step(ctx, l.kind, { op: `${id}s` }) : this.command(ctx, l, id, amount);
  }

  /** `try { <the failing call> } catch { <handler> }`, what the workflow saw as the result. */
  private async tryCall(
    ctx: RunContext,
    op: Extract<RuleOp, { t: 'try' }>,
    amount: number,
  ): Promise<unknown> {
    const id = `${op.id}x`;
    try {
      if (op.target === 'step-transient' || op.target === 'step-final')
        return await this.steps.flaky({ op: id, mode: op.target });
      const fail = op.target === 'cmd-lost' ? 'lost' : op.target === 'cmd-applied' ? 'applied' : 'refused';
      const method = this.cmds[op.lookup] as (a: CmdArgs) => Promise<unknown>;
      return await this.observeCmd(ctx, id, () => method.call(this.cmds, this.args(ctx, id, amount, fail)));
    } catch (err) {
      const e = err as Error & { code?: string };
      if (!(e instanceof CommandFailedError) && !/declined|upstream 503/.test(e.message)) throw err;
      world.observe(ctx, `${id}!`, { caught: `${e.name}:${e.code ?? ''}` });
      return { caught: e.name, handled: await this.leaf(ctx, op.handler, `${op.id}h`, amount) };
    }
  }

  /** A command call whose result (or definite failure) the workflow observes. */
  private async observeCmd(ctx: RunContext, op: string, call: () => Promise<unknown>): Promise<unknown> {
    try {
      const r = await call();
      world.observe(ctx, op, { ok: r });
      return r;
    } catch (err) {
      if (err instanceof CommandFailedError) world.observe(ctx, op, { failed: true });
      throw err;
    }
  }

  private async step(ctx: RunContext, kind: StepKind | 'emitting', a: StepArgs): Promise<StepOutput> {
    const v = await this.steps[kind](a);
    world.observe(ctx, a.op, v);
    return v;
  }

  private async command(ctx: RunContext, c: CmdSpec, op: string, amount: number): Promise<unknown> {
    const method = this.cmds[c.cmd as CmdName] as (a: CmdArgs) => Promise<unknown>;
    try {
      const args: CmdArgs = { runId: ctx.runId, op, amount, approval: c.approval, keyed: c.keyed };
      const r = await method.call(this.cmds, args);
      world.observe(ctx, op, { ok: r });
      return r;
    } catch (err) {
      if (!(err instanceof CommandFailedError)) throw err;
      world.observe(ctx, op, { failed: true });
      return null;
    }
  }

  private async wait(ctx: RunContext, op: string, timeoutMs: number | null): Promise<unknown> {
    try {
      const p = await ctx.waitForSignal(`s_${op}`, timeoutMs === null ? {} : { timeoutMs });
      world.observe(ctx, op, { payload: p });
      return p;
    } catch (err) {
      if (!(err instanceof SignalTimeoutError)) throw err;
      world.observe(ctx, op, { timedOut: true });
      return 'timeout';
    }
  }
}

/** The kind of the cases with limits, and its caps. */
export const MODEL_LIMITED_KIND = 'model-limited';
export const MODEL_LIMITS = { kind: 2, key: 1, rate: { limit: 2, periodMs: 300 } };

/** The same interpreter under limits: 2 runs of the kind at once, 1 per key, 2 begin per 300 ms. */
@DurableWorkflow(MODEL_LIMITED_KIND, {
  maxAttempts: 8,
  concurrency: MODEL_LIMITS.kind,
  concurrencyKey: (p: Program) => p.key,
  perKeyConcurrency: MODEL_LIMITS.key,
  rateLimit: MODEL_LIMITS.rate,
})
export class LimitedModelWorkflow extends ModelWorkflow {}

/** The kind of the cases with limits whose runs keep their slots while they wait. */
export const MODEL_HOLD_KIND = 'model-limited-hold';

/** The same limits, with `holdSlotWhileWaiting`: a run that began keeps its slots until it ends. */
@DurableWorkflow(MODEL_HOLD_KIND, {
  maxAttempts: 8,
  concurrency: MODEL_LIMITS.kind,
  concurrencyKey: (p: Program) => p.key,
  perKeyConcurrency: MODEL_LIMITS.key,
  rateLimit: MODEL_LIMITS.rate,
  holdSlotWhileWaiting: true,
})
export class HoldingModelWorkflow extends ModelWorkflow {}

/** The kind of the model's child runs, what it is given and what it returns. */
export const MODEL_CHILD_KIND = 'model-child';
interface ChildInput {
  op: string;
  /**
   * ok: a step and a command, then the step's output; fail: a step and a command, then
   * NonRetryableError; stall: waits for a signal never sent.
   */
  mode: 'ok' | 'fail' | 'stall';
  /** The parent run: the child's command is one logical op of it (`<op>.c`) at the target. */
  parent: string;
}

/** A child run's command op: keyed by itself (`key` option), counted at the target as its parent's. */
export const childCommandOp = (childOp: string) => `${childOp}.c`;
export const isChildCommandOp = (op: string) => op.endsWith('.c');
export interface ChildOutput {
  op: string;
  n: number;
}

/**
 * A child run of a model program: one step and a command at a target that does not deduplicate, the
 * step's output returned (or a failure after them). A child started again after a lost WAL suffix must
 * find what the lost one sent (the same id, so the same key): else its parent's op is charged twice.
 */
@DurableWorkflow(MODEL_CHILD_KIND, { maxAttempts: 8 })
export class ModelChildWorkflow {
  constructor(
    private readonly steps: ModelSteps,
    private readonly cmds: ModelCommands,
  ) {}
  async run(input: ChildInput, ctx: RunContext): Promise<ChildOutput> {
    if (input.mode === 'stall') await ctx.waitForSignal('never');
    const v = await this.steps.compute({ op: `${input.op}s` });
    const op = childCommandOp(input.op);
    await this.cmds.plain_lookup({ runId: input.parent, op, amount: v.amount, approval: false, keyed: true });
    if (input.mode === 'fail') throw new NonRetryableError(`child ${input.op} declined`);
    return { op: input.op, n: v.n };
  }
}

export const MODEL_PROVIDERS = [ModelSteps, ModelCommands, ModelWorkflow, ModelChildWorkflow];
