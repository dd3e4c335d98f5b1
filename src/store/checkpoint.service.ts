import { Injectable } from '@nestjs/common';
import type { CheckpointView } from '../interfaces/run.interface';
import { listCheckpoints, ReplayRecord } from './run-state/load-replay';
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

  /** Every checkpoint of a run with its metadata, in step order. */
  list(runId: string): Promise<CheckpointView[]> {
    return listCheckpoints(this.store, runId);
  }
}
