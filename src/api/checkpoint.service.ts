import type { Stored } from '../interfaces/stored-types.interface';
import { Injectable } from '@nestjs/common';
import { COMMAND_METADATA, STEP_METADATA, TRANSACTION_METADATA } from '../durable-execution.constants';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import type { CheckpointView, RunHistoryQuery } from '../interfaces/run.interface';
import { RunReadStore } from '../store/run-reads.store';
import { requireHistoryRange } from '../util/run-cursor';
import { requireUuid } from '../util/uuid';

/** Which of a run's checkpoints `CheckpointService.list` reads: a RunHistoryQuery, and engine entries or not. */
export interface CheckpointListQuery extends RunHistoryQuery {
  /**
   * Also the engine's own entries (default false): recorded values and waits (`$now`, `$uuid`, `$sleep`,
   * `$due`, `$signal:…`, `$deadline:…`, `$emit:…`, `$patch:…`, `$child:…`, …: every name starting with
   * `$`) and commands' outcomes (`command:…`; `CommandGateway.listForRun` lists the commands). Patch
   * markers and a sleep's due time are stored at negative positions, outside the steps' sequence: a
   * read from the oldest lists them first; `after` and `before` take positions from 0. `limit` counts
   * only what is returned.
   */
  includeEngine?: boolean;
}

/** A `@DurableStep` or `@IdempotentCommand` method (e.g. `Steps.prototype.classify`), or its recorded name. */
export type StepRef = string | ((...args: any[]) => unknown);

/** What a step method's calls were recorded as: its return value, awaited, as stored (`Stored`: a `Date` is a string). */
export type StepOutput<S> = S extends (...args: any[]) => infer R ? Stored<Awaited<R>> : unknown;

/**
 * Reads what runs recorded, step by step: the app's own API (outputs come back as stored, without the
 * module's `redact` hook). A step is named by its method (`Steps.prototype.classify`, which also types
 * its output) or by its recorded name (`'classify'`, `'command:charge'`). Checkpoints are written only
 * by the engine, each in the fenced statement of the transition it records.
 */
@Injectable()
export class CheckpointService {
  /** @internal Created by Nest dependency injection: not part of the API. */
  constructor(private readonly reads: RunReadStore) {}

  /**
   * The run's steps' checkpoints in position order; with `includeEngine`, the engine's entries too
   * (recorded values and waits such as `$uuid`, `$sleep`, `$signal:…`, emits, patch markers: names
   * starting with `$`; commands' outcomes, `command:…`). With `after`, `before`, `limit`: one page by
   * position, as `RunRepository.events` (`RunRepository.checkpoints` reads every entry).
   */
  async list(runId: string, query?: CheckpointListQuery): Promise<CheckpointView[]> {
    if (query?.includeEngine !== undefined && typeof query.includeEngine !== 'boolean')
      throw new InvalidArgumentError('includeEngine', 'must be a boolean');
    const userOnly = query?.includeEngine !== true;
    const range = requireHistoryRange(query);
    // Patch markers and a sleep's due time sit at negative positions: from the oldest, they come first.
    if (!userOnly && range.position === null && !range.newestFirst) range.position = Number.MIN_SAFE_INTEGER;
    return this.reads.checkpoints(requireUuid(runId, 'runId'), range, userOnly);
  }

  /** The checkpoint at position `index` of the run (a step or an engine entry), or null. */
  async at(runId: string, index: number): Promise<CheckpointView | null> {
    if (!Number.isSafeInteger(index) || index < 0)
      throw new InvalidArgumentError('index', `must be an integer from 0, got ${String(index)}`);
    const after = index - 1 < 0 ? undefined : index - 1;
    const [cp] = await this.list(runId, { after, limit: 1, includeEngine: true });
    return cp && cp.stepIndex === index ? cp : null;
  }

  /**
   * What every call of one step returned in this run, in call order (a command: its results). Calls
   * that failed, and commands that did not succeed, are left out. Typed by the method when given one:
   * `outputsOf(id, Steps.prototype.classify)` is `Promise<Array<Awaited<ReturnType<classify>>>>`.
   */
  async outputsOf<S extends StepRef>(runId: string, step: S): Promise<Array<StepOutput<S>>> {
    const name = recordedName(step);
    const rows = await this.reads.checkpointsNamed(requireUuid(runId, 'runId'), name);
    const out: unknown[] = [];
    for (const cp of rows) {
      if ((cp.meta as { failed?: boolean } | null)?.failed) continue;
      if (!name.startsWith('command:')) out.push(cp.output);
      else if ((cp.output as { status?: string })?.status === 'succeeded')
        out.push((cp.output as { result?: unknown }).result ?? null);
    }
    return out as Array<StepOutput<S>>;
  }

  /** What the last call of one step returned in this run (as `outputsOf`), or undefined when none did. */
  async lastOutputOf<S extends StepRef>(runId: string, step: S): Promise<StepOutput<S> | undefined> {
    return (await this.outputsOf(runId, step)).at(-1);
  }
}

/** The name a step or command is recorded under. */
function recordedName(step: StepRef): string {
  if (typeof step === 'string') {
    if (!step) throw new InvalidArgumentError('step', 'must be a step name or a decorated method');
    return step;
  }
  if (typeof step === 'function') {
    const s = Reflect.getMetadata(STEP_METADATA, step) as { name: string } | undefined;
    if (s) return s.name;
    const c = Reflect.getMetadata(COMMAND_METADATA, step) as { name: string } | undefined;
    if (c) return `command:${c.name}`;
    const t = Reflect.getMetadata(TRANSACTION_METADATA, step) as { name: string } | undefined;
    if (t) return t.name;
  }
  throw new InvalidArgumentError(
    'step',
    'must be a step name or a method decorated with @DurableStep, @IdempotentCommand or @DurableTransaction (e.g. Steps.prototype.classify)',
  );
}
