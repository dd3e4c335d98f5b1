import { Injectable } from '@nestjs/common';
import type { CheckpointView } from '../interfaces/run.interface';
import type { HistoryRange } from '../util/run-cursor';
import { ALL, readHistory } from './run-history';
import { toCheckpoint } from './run-row.mapper';
import type { ReplayRecord } from './run-state/load-replay';
import { RunStateStore } from './run-state/run-state.store';

/**
 * Reads checkpoints: a thin facade over {@link RunStateStore}. Checkpoints are written only inside the
 * store's fenced statements, in the same statement as the transition they record.
 */
@Injectable()
export class CheckpointService {
  constructor(private readonly store: RunStateStore) {}

  /** Checkpoints (index → entry) and commands (key → row) of a run for replay, in one query. */
  loadForReplay(runId: string): Promise<ReplayRecord> {
    return this.store.loadForReplay(runId);
  }

  /** The run's checkpoints with their metadata in `range` (run-history.ts); all, in step order, by default. */
  async list(runId: string, range: HistoryRange = ALL): Promise<CheckpointView[]> {
    return (await readHistory(this.store.db, 'checkpoints', runId, range)).map(toCheckpoint);
  }
}
