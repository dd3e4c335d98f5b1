import { Inject, Injectable } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { DURABLE_EXECUTION_OPTIONS } from '../durable-execution.constants';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import type { RunStateStore } from '../store/run-state/run-state.store';
import type { ReplayRecord } from '../store/run-state/load-replay';
import { HISTORY_FORMAT, RunHistory } from '../interfaces/run-history.interface';
import { ReplayHistoryStore } from '../store/replay-history.store';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { decodeStored, encodeValue } from '../util/codec';
import { ActiveRun } from './active-run';
import { DurableRegistry } from './durable.registry';
import { cleansUp, CLEANUP_BASE, WorkflowInstance } from './cleanup-phase';
import { driveCleanup } from './run-cleanup';
import { drivePhase } from './drive-phase';

/** What a replay check found for one run. */
export interface ReplayCheckResult {
  /** The run replayed. */
  runId: string;
  /** Its workflow kind. */
  kind: string;
  /** The run's status in the record that was replayed. */
  status: string;
  /**
   * How the replay ended: `returned` (run() returned), `threw` (run() threw), `end-of-record` (it asked
   * for a call the record does not hold yet: where a run that has not finished stands), `skipped`
   * (the run is being driven right now, or its workflow is not registered in this process).
   */
  ended: 'returned' | 'threw' | 'end-of-record' | 'skipped';
  /** Every way the replay differed from the record; empty when it replayed exactly. */
  problems: string[];
  /**
   * Set only for a run the engine stopped for non-determinism (held for a fixed deploy, or failed by a
   * release before holds): `replays` when this code replays its record (a retry resumes it:
   * `RunRepository.retryHeld` / `retry`), `diverges` when it still does not (`problems` say where).
   */
  held?: 'replays' | 'diverges';
}

/** Stops a checked replay at the end of its record. */
class EndOfRecord extends Error {
  constructor(
    readonly index: number,
    readonly call: string,
  ) {
    super(`the replay asked for ${call} at #${index}, past the end of the record`);
  }
}

/** A store for a replay that writes nothing: any statement at all is a problem of the check. */
const READ_ONLY_STORE = new Proxy({} as RunStateStore, {
  get: (_t, method) => () => Promise.reject(new Error(`the replay tried to write (${String(method)})`)),
});

/**
 * Makes a checked replay stop where it asks for a call its record does not hold (suspended, with the
 * call named); returns where that was, or null while it has not.
 */
function stopAtEndOfRecord(run: ActiveRun): () => EndOfRecord | null {
  let end: EndOfRecord | null = null;
  run.replayOnly = {
    reached: (index, call) => {
      end ??= new EndOfRecord(index, call);
      return run.control.halt({ kind: 'suspended', reason: end.message });
    },
  };
  return () => end;
}

/** What one replayed phase did wrong: a divergence, another stop, a recorded call it never asked for. */
async function phaseProblems(run: ActiveRun): Promise<string[]> {
  await run.control.settled();
  run.close();
  const problems: string[] = [];
  const stop = run.control.stop;
  if (stop?.kind === 'non-determinism') problems.push(stop.error.message);
  else if (stop && stop.kind !== 'suspended' && stop.kind !== 'usage')
    problems.push(`the replay stopped: ${stop.kind}`);
  // A patch marker false never asked for: code without the `patched` call takes the old path it records.
  const unasked = run.log
    .unasked()
    .filter((u) => !(u.name.startsWith('$patch:') && run.log.at(u.index)?.output === false));
  if (unasked.length && !problems.length)
    problems.push(
      `the replay never asked for ${unasked.map((u) => `${u.name} at #${u.index}`).join(', ')} of the record`,
    );
  return problems;
}

/**
 * The replay check: re-runs a run's workflow code in this process against its stored record, with
 * every step, command, value and wait answered from the record, and reports where the replay asked
 * for anything else (order, name, arguments), left a recorded call unasked, or returned another output
 * (compared byte for byte, key order included). Nothing is executed or written. A run that has not
 * finished replays up to the end of its record.
 */
@Injectable()
export class ReplayChecker {
  constructor(
    private readonly history: ReplayHistoryStore,
    private readonly registry: DurableRegistry,
    @Inject(DURABLE_EXECUTION_OPTIONS) private readonly options: ResolvedDurableOptions,
  ) {}

  /** Checks run `runId` as it is stored now. */
  async check(runId: string): Promise<ReplayCheckResult> {
    const history = await this.exportHistory(runId);
    if (!history) return { runId, kind: '?', status: 'missing', ended: 'skipped', problems: ['no such run'] };
    return this.checkHistory(history);
  }

  /**
   * Checks the newest `limit` runs of `kind` (every status but `pending` and `running`), as stored now:
   * the check a team runs before deploying a changed workflow.
   */
  async checkKind(kind: string, limit = 100): Promise<ReplayCheckResult[]> {
    const out: ReplayCheckResult[] = [];
    for (const id of await this.history.recentRunIds(kind, limit)) out.push(await this.check(id));
    return out;
  }

  /** Checks an exported history (`exportHistory`, or the CLI's `export`) against this process's code. */
  async checkHistory(history: RunHistory): Promise<ReplayCheckResult> {
    if (history?.format !== HISTORY_FORMAT)
      throw new InvalidArgumentError('history', `is not a ${HISTORY_FORMAT} document`);
    const row = history.run;
    const base = { runId: row.id, kind: row.kind, status: row.status };
    const wf = this.registry.getWorkflow(row.kind, row.version ?? this.registry.versions(row.kind)[0]);
    // Not checked: a run being driven right now, and one whose workflow (version) this process does not register.
    if (!wf || row.status === 'running' || row.status === 'pending')
      return { ...base, ended: 'skipped', problems: [] };
    const record: ReplayRecord = {
      checkpoints: new Map(history.checkpoints.map(({ index, ...rec }) => [index, rec])),
      commands: new Map(history.commands.map(({ key, ...cmd }) => [key, cmd])),
    };
    const result = { ...base, ...(await this.replay(history, record, wf.instance)) };
    // A run held (or failed) for non-determinism: does this code replay it now (a fixed deploy)?
    const held =
      ['failed', 'waiting'].includes(row.status) &&
      (row.error as { code?: unknown })?.code === 'DURABLE_NON_DETERMINISM';
    return held ? { ...result, held: result.problems.length ? 'diverges' : 'replays' } : result;
  }

  /** A run's stored record as one JSON document (from one point in time), or null when there is none. */
  exportHistory(runId: string): Promise<RunHistory | null> {
    return this.history.exportHistory(runId);
  }

  private async replay(
    history: RunHistory,
    record: ReplayRecord,
    workflow: WorkflowInstance,
  ): Promise<Pick<ReplayCheckResult, 'ended' | 'problems'>> {
    const row = history.run;
    const main = this.replayRun(history, record);
    const endOf = stopAtEndOfRecord(main);
    // As the engine drives it (a call still live when run() returned stops it the same way).
    const outcome = await drivePhase(main, () => workflow.run(row.input, main.context));
    const problems = await phaseProblems(main);
    const end = endOf();
    const ended = end ? 'end-of-record' : 'output' in outcome ? 'returned' : 'threw';
    if (row.status === 'succeeded') {
      if (end) problems.push(`a succeeded run's replay ${end.message}`);
      else if (!('output' in outcome))
        problems.push(
          `a succeeded run's replay threw: ${(outcome.error as Error)?.message ?? String(outcome.error)}`,
        );
      else problems.push(...this.compareOutput(row.output, outcome.output));
    }
    if (cleansUp(workflow) && record.checkpoints.has(CLEANUP_BASE))
      problems.push(...(await this.replayCleanup(history, record, workflow)));
    return { ended, problems };
  }

  /** The cleanup phase of a cancelled run (`onCancel`), replayed against its part of the record. */
  private async replayCleanup(
    history: RunHistory,
    record: ReplayRecord,
    workflow: Required<WorkflowInstance>,
  ): Promise<string[]> {
    const run = this.replayRun(history, record);
    const endOf = stopAtEndOfRecord(run);
    const out = await driveCleanup(run, workflow, READ_ONLY_STORE);
    const problems = await phaseProblems(run);
    if ('unrecorded' in out) problems.push(`the cleanup could not be replayed: ${out.unrecorded.message}`);
    const end = endOf();
    if (end && history.run.status === 'cancelled') problems.push(`a cancelled run's cleanup ${end.message}`);
    return problems.map((p) => `onCancel: ${p}`);
  }

  /** A run driven for a replay only: nothing it does reaches the database. */
  private replayRun(history: RunHistory, record: ReplayRecord): ActiveRun {
    const row = history.run;
    const claim = {
      id: row.id,
      kind: row.kind,
      input: row.input,
      epoch: row.epoch,
      version: row.version ?? null,
      generation: row.generation ?? 0,
      timeline: row.timeline ?? 1,
      lookupFirst: false,
      cursor: row.cursor,
      attempts: 1,
      maxAttempts: row.maxAttempts,
      cancelRequested: false,
      cancelReason: null,
      dbNow: new Date(history.exportedAt),
      sentAt: performance.now(),
    };
    return new ActiveRun(claim, 'replay-check', record.checkpoints, record.commands, READ_ONLY_STORE, {
      ...this.options,
      worker: { ...this.options.worker, leaseTtlMs: 24 * 3600_000 },
    });
  }

  /** The replay's output against the stored one, byte for byte in the stored form (key order included). */
  private compareOutput(stored: unknown, replayed: unknown): string[] {
    let text: string;
    try {
      text = encodeValue(
        replayed === undefined ? null : replayed,
        'replayed output',
        Number.MAX_SAFE_INTEGER,
      ).json;
    } catch (err) {
      return [`the replay returned an output that cannot be stored: ${(err as Error).message}`];
    }
    const want = JSON.stringify(decodeStored(stored ?? null));
    return text === want ? [] : [`the replay returned ${clip(text)}, the run recorded ${clip(want)}`];
  }
}

function clip(s: string): string {
  return s.length > 300 ? `${s.slice(0, 300)}…` : s;
}
