import { Inject, Injectable } from '@nestjs/common';
import { DURABLE_EXECUTION_OPTIONS } from '../../durable-execution.constants';
import type { RunCursor } from '../../interfaces/run.interface';
import type { ResolvedDurableOptions } from '../../options/durable-execution-options.interface';
import { DurableDatabase } from '../durable-database';
import type { SqlText } from '../durable-names';
import { ClaimOffer, claimRuns } from './claim-runs';
import { readHandoff, returnHandoffs, withdrawHandoff } from './handoff';
import type { CheckpointWrite, Fence, StoreContext } from './fence';
import { finishRun, FinishWrite } from './finish-run';
import { heartbeat, renewLease } from './heartbeat';
import { loadForReplay, ReplayRecord } from './load-replay';
import { markCleanup } from './cleanup-mark';
import { parkRun, ParkWrite } from './park-run';
import { CommandOutcomeWrite, recordCommand } from './record-command';
import { CommandToReserve, reserveCommand } from './reserve-command';
import { markCommandInDoubt } from './command-in-doubt';
import { setTags, writeProgress, writeStep } from './step-write';
import { StepWriteBatcher } from './step-batch';
import { FinishBatcher } from './finish-batch';
import { SettleWrite, settleWaits } from './settle-waits';
import { cancelChild, ChildStart, startChild } from './child-start';
import { emitEntry, StreamWrite } from './stream-emit';
import { continueRun } from './continue-run';
import { chargeBudget, correctBudget } from './budget-charge';
import type { ResolvedModelBudget } from '../../interfaces/budget.interface';
import { WakeListener } from '../wake-listener';

/** Unfinished runs of other kinds, by kind: through the claim index and the held-back runs' index. */
const OTHER_KINDS_SQL: SqlText = (t) =>
  `select kind, count(*)::int as runs from (
     select kind from ${t.runs}
      where status in ('pending', 'waiting') and limited_by is null and kind <> all($1::text[])
     union all
     select kind from ${t.runs}
      where status in ('pending', 'waiting') and limited_by is not null and kind <> all($1::text[])
   ) x group by kind order by kind`;

/**
 * The one home of run-state writes: each method is one SQL statement (one round trip), bound in the
 * file that holds the statement (`src/store/run-state/*.ts`). Every fenced write carries the claim's
 * (run, worker, epoch) and throws LeaseLostError when a newer claim owns the run: nothing was written.
 * @internal
 */
@Injectable()
export class RunStateStore implements StoreContext {
  /** Group commit of step writes (see StepWriteBatcher). */
  readonly steps: StepWriteBatcher;
  /** Group commit of finishes (see FinishBatcher). */
  readonly finishes: FinishBatcher;

  constructor(
    readonly db: DurableDatabase,
    @Inject(DURABLE_EXECUTION_OPTIONS) readonly options: ResolvedDurableOptions,
  ) {
    this.steps = new StepWriteBatcher(this, options.worker.groupCommit);
    this.finishes = new FinishBatcher(this, options.worker.groupCommit);
  }

  /** Claims due runs (SKIP LOCKED), raising epoch and attempts, and offers hand-off slots. See `claimRuns`. */
  claim(
    workerId: string,
    kinds: string[],
    limit: number,
    exclude: string[] = [],
    limited = false,
    versions?: { kinds: string[]; versions: number[] },
    handoff?: ClaimOffer,
  ) {
    return claimRuns(this, workerId, kinds, limit, exclude, limited, versions, handoff);
  }

  /** A run a start handed to `workerId`, read to begin it (null: not its hand-off any more). */
  readHandoff(runId: string, workerId: string) {
    return readHandoff(this, runId, workerId);
  }

  /** A stopping worker: no slot offered any more, then its hand-offs not begun (except `keep`) handed back. */
  async closeHandoffs(workerId: string, keep: () => string[]): Promise<number> {
    await withdrawHandoff(this, workerId);
    return returnHandoffs(this, workerId, keep());
  }

  /** Extends the leases of `runs` (each fenced by its epoch); returns those still owned. */
  heartbeat(workerId: string, runs: Array<{ id: string; epoch: number }>) {
    return heartbeat(this, workerId, runs);
  }

  /** Renews one lease, fenced. */
  renew(fence: Fence) {
    return renewLease(this, fence);
  }

  /** Everything replay needs, in one query. */
  loadForReplay(runId: string): Promise<ReplayRecord> {
    return loadForReplay(this, runId);
  }

  /** A step commit (`progressMade`) or a `started` mark, with values still pending. */
  writeStep(
    fence: Fence,
    cursor: RunCursor,
    checkpoints: CheckpointWrite[],
    event: string,
    payload: Record<string, unknown>,
    progressMade: boolean,
  ) {
    return writeStep(this, fence, cursor, checkpoints, event, payload, progressMade);
  }

  /** A cancelled run's cleanup begins: its marker checkpoint (with the cancel reason) and values pending. */
  markCleanup(
    fence: Fence,
    marker: { index: number; name: string },
    cursor: RunCursor,
    records: CheckpointWrite[],
  ) {
    return markCleanup(this, fence, marker, cursor, records);
  }

  /** Merges tags into the run's (ctx.setTags), fenced. */
  setTags(fence: Fence, tagsJson: string) {
    return setTags(this, fence, tagsJson);
  }

  /** Starts the run's next generation (ctx.continueAsNew), fenced. */
  continueAsNew(fence: Fence, inputJson: string) {
    return continueRun(this, fence, inputJson);
  }

  /** Appends an entry to the run's stream (ctx.emit), fenced. */
  emit(fence: Fence, w: StreamWrite) {
    return emitEntry(this, fence, w);
  }

  /** Moves the intra-step cursor (ctx.progress). */
  progress(fence: Fence, cursor: RunCursor) {
    return writeProgress(this, fence, cursor);
  }

  /** Leaves `running`: terminal, or `waiting` with a due time. */
  finish(fence: Fence, w: FinishWrite) {
    return finishRun(this, fence, w);
  }

  /** Reserves a command before it is sent. */
  reserveCommand(fence: Fence, cursor: RunCursor, cmd: CommandToReserve, records: CheckpointWrite[]) {
    return reserveCommand(this, fence, cursor, cmd, records);
  }

  /** Records a command's outcome with its checkpoint. */
  recordCommand(fence: Fence, cursor: RunCursor, w: CommandOutcomeWrite) {
    return recordCommand(this, fence, cursor, w);
  }

  /** A dispatched command whose call ended without a definite answer: `in_doubt`, with its error. */
  commandInDoubt(fence: Fence, w: Parameters<typeof markCommandInDoubt>[2]) {
    return markCommandInDoubt(this, fence, w);
  }

  /**
   * Kinds of unfinished runs (pending or waiting) other than `kinds`, with how many: a worker logs them
   * at start, since a run of a kind no worker registers (a renamed workflow) waits forever.
   */
  async otherKinds(kinds: string[]): Promise<Array<{ kind: string; runs: number }>> {
    const { rows } = await this.db.query<{ kind: string; runs: number }>(OTHER_KINDS_SQL, [kinds]);
    return rows;
  }

  /** Parks the run (approval, in-doubt, sleep), due at once when something already arrived. */
  park(fence: Fence, w: ParkWrite) {
    return parkRun(this, fence, w);
  }

  /** Consumes a stored signal, records a timeout, or parks: one statement. */
  settleWaits(fence: Fence, w: SettleWrite) {
    return settleWaits(this, fence, w);
  }

  /** Starts a child run once (keyed by parent and step) and records the start on the parent. */
  startChild(fence: Fence, c: ChildStart) {
    return startChild(this, fence, c);
  }

  /** Cancels a child run whose wait timed out (at once when it never began, else by request). */
  cancelChild(fence: Fence, childId: string, reason: string) {
    return cancelChild(this, fence, childId, reason);
  }

  /** Admits one call on model budget `name`, or says how long until it fits (not fenced: a charge of a stale claim only costs budget). */
  chargeBudget(name: string, budget: ResolvedModelBudget, runId: string, step: number) {
    return chargeBudget(this, name, budget, runId, step);
  }

  /** Replaces an admitted call's estimate with its real token usage. */
  correctBudget(useId: string, tokens: number) {
    return correctBudget(this, useId, tokens);
  }

  /** A LISTEN connection on the schema's wake-up channel (not started): `onWake` runs on every NOTIFY of a due run. */
  wakeListener(onWake: (payload?: string) => void): WakeListener {
    return new WakeListener(this.db.listenConfig, this.db.names.wakeChannel, onWake);
  }
}
