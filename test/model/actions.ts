/**
 * Outside actions on a case's runs, through the public API only: signals, cancels, retries, and an
 * operator who decides approvals and settles in-doubt commands the way a careful one would (asks the
 * target first; re-sends or fails only a command the target never saw).
 */
import { INestApplication } from '@nestjs/common';
import { DurableWorker } from '../../src/engine/worker.service';
import { CommandGateway, LeaseService, RunRepository } from '../../src';
import { RuleOp, ruleCommands } from './grammar';
import type { Action, CmdSpec, Program } from './program';
import { isChildCommandOp, vendorOf } from './workflow';
import { claimTag, world } from './world';

const OPERATOR = 'model-operator';

/** The command spec of a logical op (a `cmd` op or a fan-out branch) of a program. */
export function specOf(program: Program, op: string): CmdSpec | undefined {
  for (const o of program.ops) {
    if (o.t === 'cmd' && o.id === op) return o;
    if (o.t === 'fan') for (const b of o.branches) if (b.id === op) return b;
    if (!['step', 'cmd', 'fan', 'wait', 'sleep', 'clock'].includes(o.t))
      for (const c of ruleCommands(o as RuleOp)) if (c.op === op) return c.spec;
  }
  return undefined;
}

/**
 * Whether op `op` of run `runId` (one of the case's) has a key of its own; a child run's command counts
 * as an op of its parent, keyed.
 */
export function keyedOp(programs: Program[], runIds: string[]): (runId: string, op: string) => boolean {
  return (runId, op) => {
    const p = programs[runIds.indexOf(runId)];
    return !!p && (!!specOf(p, op)?.keyed || isChildCommandOp(op));
  };
}

/** Applies one action to one run; an action the run's state refuses is a no-op (as for a real client). */
export async function applyAction(
  app: INestApplication,
  runId: string,
  program: Program,
  action: Action,
): Promise<boolean> {
  const runs = app.get(RunRepository);
  try {
    if (action.a === 'signal') await runs.signal(runId, `s_${action.wait}`, { wait: action.wait });
    else if (action.a === 'cancel') await runs.cancel(runId, 'model: cancel', OPERATOR);
    else if (action.a === 'retry') {
      const run = await runs.get(runId);
      if (!run || !['failed', 'dead_lettered'].includes(run.status)) return false;
      await runs.retry(runId, OPERATOR);
      world.retries.set(runId, (world.retries.get(runId) ?? 0) + 1);
    } else return decide(app, runId, program);
    return true;
  } catch {
    return false;
  }
}

/**
 * `release`: the holder of the run is reported gone, through the app of another worker (a process
 * cannot release its own). Every epoch it held is reported to `cut` (its unfinished work may run
 * again, as after a takeover). Returns whether anything was released.
 */
export async function releaseHolder(
  apps: INestApplication[],
  runId: string,
  /** The server's WAL timeline now (every live claim was made on it). */
  timeline: number,
  cut: (tag: string) => void,
): Promise<boolean> {
  try {
    const holder = await apps[0].get(LeaseService).holder(runId);
    if (!holder) return false;
    const via = apps.find((a) => a.get(DurableWorker).id !== holder.workerId);
    if (!via) return false;
    const leases = via.get(LeaseService);
    for (const r of await leases.heldBy(holder.workerId))
      cut(claimTag(r.runId, { timeline, epoch: r.epoch }));
    const released = await leases.releaseWorker(holder.workerId);
    // A run it claimed between the two reads: its epoch now, or the one before if it was claimed since.
    for (const r of released) {
      const epoch = (await via.get(RunRepository).get(r.runId))?.epoch ?? 0;
      cut(claimTag(r.runId, { timeline, epoch }));
      cut(claimTag(r.runId, { timeline, epoch: epoch - 1 }));
    }
    return released.length > 0;
  } catch {
    return false;
  }
}

/**
 * The operator: approves or rejects what awaits approval (as the program says), settles what is in
 * doubt by asking the target. Returns whether anything was decided.
 */
export async function decide(app: INestApplication, runId: string, program: Program): Promise<boolean> {
  const runs = app.get(RunRepository);
  const cmds = await app.get(CommandGateway).listForRun(runId);
  let changed = false;
  for (const c of cmds) {
    const spec = specOf(program, (c.payload as { op: string }).op);
    if (!spec) continue;
    try {
      if (c.status === 'awaiting_approval') {
        const d = { by: OPERATOR, note: `model: ${spec.decision}` };
        if (spec.decision === 'approve') await runs.approve(runId, c.idempotencyKey, d);
        else await runs.reject(runId, c.idempotencyKey, d);
        changed = true;
      } else if (c.status === 'in_doubt') {
        const seen = vendorOf(c.name).peek(c.idempotencyKey);
        if (seen !== undefined)
          await runs.resolveCommand(c.idempotencyKey, { outcome: 'succeeded', result: seen }, OPERATOR);
        else if (spec.resolution === 'retry')
          await runs.resolveCommand(c.idempotencyKey, { outcome: 'retry' }, OPERATOR);
        else
          await runs.resolveCommand(
            c.idempotencyKey,
            { outcome: 'failed', error: 'model: the target never saw it' },
            OPERATOR,
          );
        changed = true;
      }
    } catch {
      // A decision that lost a race with the run (or another decision) changes nothing.
    }
  }
  return changed;
}
