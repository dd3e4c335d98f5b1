import { ForkRefusedError } from '../errors/fork-refused.error';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { InvalidRunStateError } from '../errors/invalid-run-state.error';
import { RunNotFoundError } from '../errors/run-not-found.error';
import type { RunView } from '../interfaces/run.interface';
import { eventPayload } from '../store/event-payload';
import { ofGeneration } from '../engine/cleanup-phase';
import { planCut } from './fork-plan';
import type { ForkDeps } from './fork-plan';

/** What a rewind in place was asked for, checked by `forkRun`. */
export interface RewindAsk {
  fromStep: number;
  version: number | undefined;
  inputJson: string | null;
  edit: { step: number; valueJson: string } | undefined;
  by: string | undefined;
}

const MAX_REWIND_TRIES = 50;
const REWINDABLE = ['failed', 'dead_lettered'];
const SETTLED = ['succeeded', 'failed', 'rejected'];

/**
 * `RunRepository.fork(id, { inPlace: true, ... })`: the run itself, failed or dead-lettered, goes back to
 * `fromStep` under its own id and its next generation (REWIND_RUN_SQL). The same checks as a fork's cut,
 * and no command of the run without an outcome anywhere (one at or after `fromStep` would be sent again
 * under the new generation's key while it may have acted). @internal
 */
export async function rewindRun(
  d: ForkDeps,
  id: string,
  ask: RewindAsk,
): Promise<{ run: RunView; created: boolean; inherited: number }> {
  for (let attempt = 1; ; attempt++) {
    const read = await d.control.forks.plan(id);
    if (!read) throw new RunNotFoundError(id);
    if (!REWINDABLE.includes(read.status)) throw new InvalidRunStateError(id, read.status, 'rewind');
    const cut = planCut(read, ask.fromStep, undefined, ask.edit);
    const recorded = new Set(read.positions.map((p) => p.index));
    const open = read.commands.find(
      (c) =>
        ofGeneration(c.key, id, read.generation) && !recorded.has(c.index) && !SETTLED.includes(c.status),
    );
    if (open)
      throw new ForkRefusedError(
        id,
        ask.fromStep,
        'unsettled-command',
        open.index,
        `command ${open.key} at step ${open.index} has no recorded outcome (${open.status}): a rewind would send it again under a new key while it may have acted. Settle it first (RunRepository.resolveCommand), or fork instead.`,
        open.key,
      );
    if (
      ask.version !== undefined &&
      d.registry.getWorkflow(read.kind) &&
      !d.registry.getWorkflow(read.kind, ask.version)
    )
      throw new InvalidArgumentError('version', `names no version of '${read.kind}' registered here`);
    const inherited = read.positions.filter((p) => p.index < ask.fromStep).length;
    const outcome = await d.control.forks.rewind({
      runId: id,
      rowVersion: read.rowVersion,
      fromStep: ask.fromStep,
      inputJson: ask.inputJson,
      version: ask.version ?? null,
      edit: cut.edit,
      event: eventPayload(d.options, 'run.rewound', {
        fromStep: ask.fromStep,
        ...(cut.edit ? { edited: cut.edit.index } : {}),
        ...(ask.by ? { by: ask.by } : {}),
      }),
      childEnds: cut.childEnds,
    });
    if (outcome.kind === 'rewound') return { run: (await d.reads.get(id))!, created: true, inherited };
    if (outcome.kind === 'not-found') throw new RunNotFoundError(id);
    if (outcome.kind === 'not-ended') continue; // its status changed meanwhile: plan again (and say so)
    if (attempt >= MAX_REWIND_TRIES)
      throw new Error(`rewind of run ${id}: its record changed under ${attempt} tries`);
  }
}
