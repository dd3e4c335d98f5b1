import { ofGeneration } from '../engine/cleanup-phase';
import { isDelivery } from '../engine/replay-log';
import { ForkRefusedError } from '../errors/fork-refused.error';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import type { ForkPlanRead, ForkPosition } from '../store/fork/run-fork.store';
import type { DurableRegistry } from '../engine/durable.registry';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import type { RunControlStore } from '../store/run-control.store';
import type { RunReadStore } from '../store/run-reads.store';

/** What `RunRepository.fork` needs. @internal */
export interface ForkDeps {
  control: RunControlStore;
  reads: RunReadStore;
  registry: DurableRegistry;
  options: ResolvedDurableOptions;
}

/** What the checks of a cut decided: what the fork's statement copies beside the positions. */
export interface ForkCut {
  /** End signals (`$child:<id>`) of children it inherits the start of but not the wait for. */
  childEnds: string[];
  /** The edited position, with its stored output (JSON), or null. */
  edit: { index: number; outputJson: string } | null;
}

const LIVE = ['pending', 'running', 'waiting'];
const UNSETTLED: Record<string, string> = {
  pending: 'in doubt (it may have been sent; settle it with RunRepository.resolveCommand)',
  in_doubt: 'in doubt (settle it with RunRepository.resolveCommand)',
  awaiting_approval: 'awaiting approval (approve or reject it)',
  approved: 'approved but not sent yet (let the run send it)',
};

/** The order a recorded result reached the workflow in (as the replay log orders deliveries). */
const order = (p: ForkPosition): number => (p.seq === null ? p.index - 2 ** 40 : p.seq);

/**
 * The checks of `RunRepository.fork` on the original as read (FORK_PLAN_SQL), before anything is
 * written: the choice about a live original, the cut (a prefix of the delivery order), unsettled
 * commands and running children before it, and an edit only at the last inherited delivery.
 */
export function planCut(
  run: ForkPlanRead,
  fromStep: number,
  original: 'leave' | 'cancel' | undefined,
  edit: { step: number; valueJson: string } | undefined,
): ForkCut {
  if (LIVE.includes(run.status) && original === undefined)
    throw new InvalidArgumentError(
      'original',
      `is required: run ${run.id} is ${run.status}; say whether it goes on beside its fork ('leave') or is cancelled in the fork's statement ('cancel')`,
    );
  if (!LIVE.includes(run.status) && original === 'cancel')
    throw new InvalidArgumentError(
      'original',
      `'cancel' does not apply: run ${run.id} is ${run.status} already`,
    );
  if (original === 'cancel' && run.cancelRequested)
    throw new InvalidArgumentError(
      'original',
      `'cancel' does not apply: run ${run.id} is being cancelled already (its onCancel may be running); wait for it to end, or 'leave' it`,
    );
  // This generation's command rows only: a rewound run keeps the rows of the generations it ended.
  const commands = run.commands.filter((c) => ofGeneration(c.key, run.id, run.generation));
  const last = Math.max(-1, ...run.positions.map((p) => p.index), ...commands.map((c) => c.index));
  if (fromStep > last + 1)
    throw new InvalidArgumentError(
      'fromStep',
      `is past the end of run ${run.id}'s record: its last position is ${last}, so fork from ${last + 1} at most`,
    );
  const deliveries = run.positions.filter((p) => isDelivery(p.name)).sort((a, b) => order(a) - order(b));
  checkPrefix(run.id, fromStep, deliveries, last);
  const recorded = new Set(run.positions.map((p) => p.index));
  const open = commands.find((c) => c.index < fromStep && !recorded.has(c.index));
  if (open)
    throw new ForkRefusedError(
      run.id,
      fromStep,
      'unsettled-command',
      open.index,
      `command ${open.key} at step ${open.index} is ${UNSETTLED[open.status] ?? `${open.status} but not recorded by the run yet (retry the run so that it replays it)`}, or fork from step ${open.index} or before (the fork then runs that command itself, under a key of its own).`,
      open.key,
    );
  const inherited = run.positions.filter((p) => p.index < fromStep);
  const names = new Set(inherited.map((p) => p.name));
  const childEnds: string[] = [];
  for (const p of inherited) {
    if (!p.child || names.has(`$child:${p.child}`)) continue;
    const end = `$child:${p.child}`;
    if (run.childEnds.includes(end)) childEnds.push(end);
    else
      throw new ForkRefusedError(
        run.id,
        fromStep,
        'running-child',
        p.index,
        `child run ${p.child} started at step ${p.index} has not ended, and its end would reach the original, not the fork. Wait for it to end, or fork from step ${p.index} or before (the fork then starts a child of its own).`,
        undefined,
        p.child,
      );
  }
  return { childEnds, edit: edit ? editAt(run.id, fromStep, deliveries, edit) : null };
}

/** The positions before `fromStep` must be the first ones delivered: no cut through a concurrent group. */
function checkPrefix(id: string, fromStep: number, deliveries: ForkPosition[], last: number): void {
  const cutAt = (k: number): boolean => {
    const inside = deliveries.filter((p) => p.index < k).length;
    return deliveries.slice(0, inside).every((p) => p.index < k);
  };
  if (cutAt(fromStep)) return;
  const inside = deliveries.filter((p) => p.index < fromStep).length;
  const late = deliveries.slice(inside).find((p) => p.index < fromStep)!;
  const early = deliveries.slice(0, inside).find((p) => p.index >= fromStep)!;
  let below = fromStep - 1;
  while (below > 0 && !cutAt(below)) below--;
  let above = fromStep + 1;
  while (above <= last && !cutAt(above)) above++;
  throw new ForkRefusedError(
    id,
    fromStep,
    'concurrent',
    late.index,
    `step ${late.index} (${late.name}) reached the workflow after step ${early.index} (${early.name}): they ran concurrently (a Promise.all, a race), and no moment of the run had exactly the steps before ${fromStep} recorded. Fork from step ${below}${above <= last + 1 ? ` or ${above}` : ''}.`,
  );
}

/** The edited result: only at the last inherited delivery, a step's or a command's. */
function editAt(
  id: string,
  fromStep: number,
  deliveries: ForkPosition[],
  edit: { step: number; valueJson: string },
): { index: number; outputJson: string } {
  const inherited = deliveries.filter((p) => p.index < fromStep);
  const lastOne = inherited[inherited.length - 1];
  if (!lastOne || lastOne.index !== edit.step)
    throw new InvalidArgumentError(
      'editResult.step',
      lastOne
        ? `must be ${lastOne.index}, the last step run ${id} delivered before step ${fromStep} (a later inherited call may have been made from an earlier result); got ${edit.step}`
        : `cannot be given: the fork of run ${id} from step ${fromStep} inherits no result`,
    );
  if (lastOne.name.startsWith('$'))
    throw new InvalidArgumentError(
      'editResult.step',
      `names ${lastOne.name} at step ${lastOne.index}: only a step's or a command's result can be edited`,
    );
  const outputJson = lastOne.name.startsWith('command:')
    ? `{"status":"succeeded","result":${edit.valueJson}}`
    : edit.valueJson;
  return { index: lastOne.index, outputJson };
}
