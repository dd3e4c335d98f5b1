/**
 * The model workflow: interprets a generated program (its run input) with the public API only, and
 * records in `world` every value a consumer saw and every execution of a step body.
 */
import { Injectable } from '@nestjs/common';
import {
  CommandContext,
  CommandFailedError,
  CommandLookup,
  currentRun,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  RunContext,
  SignalTimeoutError,
} from '../../src';
import type { CmdName, CmdSpec, Program, StepKind } from './program';
import { tinyDelay, world } from './world';

export const MODEL_KIND = 'model-program';

interface StepArgs {
  op: string;
  nul?: 'none' | 'result' | 'progress';
}
export interface StepOutput {
  op: string;
  n: number;
  amount: number;
  note?: string;
}
interface CmdArgs {
  runId: string;
  op: string;
  amount: number;
  approval: boolean;
}

/** A step body: its value is derived from the args and a number unique to this execution. */
async function stepBody(a: StepArgs): Promise<StepOutput> {
  const ctx = currentRun()!;
  const n = world.nextExecution();
  world.executions.push({ runId: ctx.runId, op: a.op, epoch: ctx.epoch, n });
  await tinyDelay();
  const out: StepOutput = { op: a.op, n, amount: (n % 97) + 1 };
  if (a.nul === 'result') out.note = `nul\u0000${n}`;
  if (a.nul === 'progress') await ctx.progress(0, { note: `nul\u0000${n}` });
  return out;
}

@Injectable()
export class ModelSteps {
  @DurableStep({ name: 'compute_step', kind: 'compute' })
  compute(a: StepArgs): Promise<StepOutput> {
    return stepBody(a);
  }
  @DurableStep({ name: 'model_step', kind: 'model' })
  model(a: StepArgs): Promise<StepOutput> {
    return stepBody(a);
  }
  @DurableStep({ name: 'tool_step', kind: 'tool' })
  tool(a: StepArgs): Promise<StepOutput> {
    return stepBody(a);
  }
}

const approval = (a: CmdArgs) => a.approval;

@Injectable()
export class ModelCommands implements CommandLookup {
  @IdempotentCommand({ name: 'dedup_lookup', inDoubt: 'lookup', requiresApproval: approval })
  dedup_lookup(a: CmdArgs, ctx?: CommandContext) {
    return world.dedup.apply(ctx!.idempotencyKey, a);
  }
  @IdempotentCommand({ name: 'dedup_retry', inDoubt: 'retry-with-key', requiresApproval: approval })
  dedup_retry(a: CmdArgs, ctx?: CommandContext) {
    return world.dedup.apply(ctx!.idempotencyKey, a);
  }
  @IdempotentCommand({ name: 'dedup_manual', inDoubt: 'manual', requiresApproval: approval })
  dedup_manual(a: CmdArgs, ctx?: CommandContext) {
    return world.dedup.apply(ctx!.idempotencyKey, a);
  }
  @IdempotentCommand({ name: 'plain_lookup', inDoubt: 'lookup', requiresApproval: approval })
  plain_lookup(a: CmdArgs, ctx?: CommandContext) {
    return world.plain.apply(ctx!.idempotencyKey, a);
  }
  @IdempotentCommand({ name: 'plain_manual', inDoubt: 'manual', requiresApproval: approval })
  plain_manual(a: CmdArgs, ctx?: CommandContext) {
    return world.plain.apply(ctx!.idempotencyKey, a);
  }
  lookupCommand(command: string, key: string) {
    return (command.startsWith('dedup') ? world.dedup : world.plain).lookup(key);
  }
}

/** The vendor a command name goes to. */
export const vendorOf = (cmd: string) => (cmd.startsWith('dedup') ? world.dedup : world.plain);

@DurableWorkflow(MODEL_KIND, { maxAttempts: 8 })
export class ModelWorkflow {
  constructor(
    private readonly steps: ModelSteps,
    private readonly cmds: ModelCommands,
  ) {}

  async run(input: Program, ctx: RunContext): Promise<Record<string, unknown>> {
    let amount = 0;
    const out: Record<string, unknown> = {};
    for (const op of input.ops) {
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
      else {
        const v = { now: ctx.now().toISOString(), uuid: ctx.uuid() };
        world.observe(ctx.runId, op.id, ctx.epoch, v);
        out[op.id] = v.uuid;
      }
    }
    return out;
  }

  private async step(ctx: RunContext, kind: StepKind, a: StepArgs): Promise<StepOutput> {
    const v = await this.steps[kind](a);
    world.observe(ctx.runId, a.op, ctx.epoch, v);
    return v;
  }

  private async command(ctx: RunContext, c: CmdSpec, op: string, amount: number): Promise<unknown> {
    const method = this.cmds[c.cmd as CmdName] as (a: CmdArgs) => Promise<unknown>;
    try {
      const r = await method.call(this.cmds, { runId: ctx.runId, op, amount, approval: c.approval });
      world.observe(ctx.runId, op, ctx.epoch, { ok: r });
      return r;
    } catch (err) {
      if (!(err instanceof CommandFailedError)) throw err;
      world.observe(ctx.runId, op, ctx.epoch, { failed: true });
      return null;
    }
  }

  private async wait(ctx: RunContext, op: string, timeoutMs: number | null): Promise<unknown> {
    try {
      const p = await ctx.waitForSignal(`s_${op}`, timeoutMs === null ? {} : { timeoutMs });
      world.observe(ctx.runId, op, ctx.epoch, { payload: p });
      return p;
    } catch (err) {
      if (!(err instanceof SignalTimeoutError)) throw err;
      world.observe(ctx.runId, op, ctx.epoch, { timedOut: true });
      return 'timeout';
    }
  }
}

export const MODEL_PROVIDERS = [ModelSteps, ModelCommands, ModelWorkflow];
