import type { RunCancelInfo } from '../interfaces/run.interface';
import type { CommandRow, RecordedStep, ReplayRecord } from '../store/run-state/load-replay';

import { CLEANUP_BASE } from '../store/run-state/cleanup-mark';
import { generationPart } from '../store/run-state/fence';

export { CLEANUP_BASE };

/** The name of the marker checkpoint: the cleanup began (its output: `{ reason }`). @internal */
export const CLEANUP_MARKER = '$cancelled';

/** A workflow instance as the engine calls it: `run()`, and `onCancel()` when it cleans up. @internal */
export interface WorkflowInstance {
  run(input: unknown, ctx: unknown): unknown;
  onCancel?(input: unknown, ctx: unknown, cancel: RunCancelInfo): unknown;
}

/** True when the workflow declares an `onCancel` cleanup. @internal */
export function cleansUp(instance: unknown): instance is Required<WorkflowInstance> {
  return typeof (instance as WorkflowInstance | null)?.onCancel === 'function';
}

/** The part of a record that belongs to `run()` (below CLEANUP_BASE) or to the cleanup (above it). @internal */
export function phaseOf(
  record: { checkpoints: Map<number, RecordedStep>; commands: Map<string, CommandRow> },
  phase: 'run' | 'cleanup',
): ReplayRecord {
  // The marker precedes every position of the cleanup: without it, everything is run()'s.
  if (!record.checkpoints.has(CLEANUP_BASE))
    return phase === 'run' ? record : { checkpoints: new Map(), commands: new Map() };
  // Patch markers (negative positions, `ctx.patched`) belong to the run as a whole: both phases read them.
  const inPhase = (index: number) =>
    phase === 'run' ? index < CLEANUP_BASE : index > CLEANUP_BASE || index < 0;
  return {
    checkpoints: new Map([...record.checkpoints].filter(([i]) => inPhase(i))),
    commands: new Map([...record.commands].filter(([, c]) => inPhase(c.index))),
  };
}

/** The lowest delivery order the cleanup may take: above every one `run()` recorded. @internal */
export function seqFloor(record: ReplayRecord): number {
  let max = -1;
  for (const r of record.checkpoints.values()) if (r.seq !== null && r.seq > max) max = r.seq;
  return max + 1;
}

/**
 * What `onCancel` is told, read from the stored record only (the same on the first cleanup and on
 * every resume of it): the reason the marker recorded, and what `run()` recorded before the cancel.
 * @internal
 */
export function cancelInfo(record: ReplayRecord): RunCancelInfo {
  const marker = record.checkpoints.get(CLEANUP_BASE);
  const reason = (marker?.output as { reason?: unknown } | null)?.reason;
  const completed = [...record.checkpoints]
    .filter(([index, r]) => index < CLEANUP_BASE && !r.name.startsWith('$'))
    .sort(([a], [b]) => a - b)
    .map(([index, r]) => ({ index, name: r.name, ...outcomeOf(r) }));
  return { reason: typeof reason === 'string' ? reason : null, completed };
}

/**
 * What the workflow got at a recorded position: a step's output (or stored error), a command's
 * result (or, when it failed or was rejected, its stored error).
 */
function outcomeOf(r: RecordedStep): { output: unknown; failed: boolean } {
  if (!r.name.startsWith('command:')) return { output: r.output, failed: r.failed === true };
  const o = r.output as { status?: string; result?: unknown; error?: unknown } | null;
  return o?.status === 'succeeded'
    ? { output: o.result ?? null, failed: false }
    : { output: o?.error ?? null, failed: true };
}

/**
 * The command rows of the record by step index, of the run's current generation only (keys
 * `run_<id>[:g<n>]:…`): a rewind in place (`RunRepository.rewind`) starts the next generation and keeps
 * the rows of the one it ended, whose positions the new generation reuses.
 */
export function reservedOf(record: ReplayRecord, runId: string, generation = 0): Map<number, CommandRow> {
  const mine = [...record.commands].filter(([key]) => ofGeneration(key, runId, generation));
  return new Map(mine.map(([, c]) => [c.index, c]));
}

/** Whether a command key names run `runId`'s generation `generation` (`run_<id>[:g<n>]:step_…`, `…:key_…`). */
export function ofGeneration(key: string, runId: string, generation = 0): boolean {
  const prefix = `run_${runId}${generationPart(generation)}:`;
  return key.startsWith(prefix) && !/^g\d+:/.test(key.slice(prefix.length));
}
