import { Injectable } from '@nestjs/common';
import { RunNotFoundError } from '../errors/run-not-found.error';
import type { CheckpointView, RunCursor, RunEvent, RunStatus, RunView } from '../interfaces/run.interface';
import { RunStats, RunStatsReader } from '../store/run-stats.reader';
import { DurableDatabase } from '../store/durable-database';
import { ADMIN_LIST_RUNS_SQL } from '../store/sql/admin-list-runs.sql';
import type { CommandView } from '../interfaces/command.interface';
import { CommandGateway } from '../api/command-gateway.service';
import { RunRepository } from '../api/run.repository';
import { requireText, requireTimestamp } from '../util/arguments';
import { pageOfRuns } from '../util/run-cursor';
import { AdminRedactor } from './admin-redactor';
import type { ListRunsQueryDto } from './dto/list-runs-query.dto';
import { buildTimeline, RunTimeline } from './run-timeline';

/** A run in the admin list: no input or output, so a page stays small whatever runs carry. */
export interface AdminRunSummary {
  id: string;
  kind: string;
  status: RunStatus;
  cursor: RunCursor;
  epoch: number;
  workerId: string | null;
  attempts: number;
  maxAttempts: number;
  parkedReason: string | null;
  errorMessage: string | null;
  inDoubtCommands: number;
  awaitingApproval: number;
  availableAt: Date;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
}

/** One page of the admin list; `next` is absent on the last page. */
export interface AdminRunPage {
  items: AdminRunSummary[];
  next?: string;
}

/** Everything about one run: the row, its checkpoints, commands, events, and the timeline built from them. */
export interface AdminRunDetail {
  run: RunView;
  checkpoints: CheckpointView[];
  commands: CommandView[];
  events: RunEvent[];
  timeline: RunTimeline;
}

/**
 * Reads for the admin API and the inspector page, with run data through the module's `redact` hook
 * (AdminRedactor). Writes go through RunRepository. @internal
 */
@Injectable()
export class AdminRunsService {
  constructor(
    private readonly db: DurableDatabase,
    private readonly runs: RunRepository,
    private readonly commands: CommandGateway,
    private readonly redactor: AdminRedactor,
  ) {}

  async list(q: ListRunsQueryDto): Promise<AdminRunPage> {
    const limit = q.limit ?? 50;
    const page = await pageOfRuns(q.after || undefined, limit, async (after, take) => {
      requireText(q.kind, 'kind', { optional: true });
      const { rows } = await this.db.query(ADMIN_LIST_RUNS_SQL, [
        q.status?.length ? q.status : null,
        q.kind ?? null,
        q.createdFrom === undefined ? null : requireTimestamp(q.createdFrom, 'createdFrom'),
        q.createdTo === undefined ? null : requireTimestamp(q.createdTo, 'createdTo'),
        q.deadLettered ?? null,
        q.inDoubt ?? null,
        after?.[0] ?? null,
        after?.[1] ?? null,
        take,
      ]);
      return rows.map((r) => ({ item: toSummary(r), createdKey: r.created_key, id: r.id }));
    });
    return { items: page.items.map((s) => this.redactor.summary(s)), next: page.next };
  }

  stats(): Promise<RunStats> {
    return new RunStatsReader(this.db).read();
  }

  /** The run and its whole record; RunNotFoundError (404) for an unknown id. */
  async detail(id: string): Promise<AdminRunDetail> {
    const stored = await this.runs.get(id);
    if (!stored) throw new RunNotFoundError(id);
    const [cps, cmds, evs] = await Promise.all([
      this.runs.checkpoints(id),
      this.commands.listForRun(id),
      this.runs.events(id),
    ]);
    const r = this.redactor;
    const checkpoints = cps.map((c) => r.checkpoint(c));
    const events = evs.map((e) => r.event(e));
    const commands = cmds.map((c) => r.command(c));
    return {
      run: r.run(stored),
      checkpoints,
      commands,
      events,
      timeline: buildTimeline(events, checkpoints),
    };
  }

  /** A run as an admin response shows it (through the `redact` hook). */
  shown(run: RunView): RunView {
    return this.redactor.run(run);
  }

  /** The run, redacted for display; null for an unknown id (as RunRepository.get). */
  async run(id: string): Promise<RunView | null> {
    const run = await this.runs.get(id);
    return run && this.redactor.run(run);
  }

  /**
   * The run's command with this key, redacted for display, or undefined (a key of another run never
   * matches); RunNotFoundError for an unknown run.
   */
  async commandOf(runId: string, key: string): Promise<CommandView | undefined> {
    if (!(await this.runs.get(runId))) throw new RunNotFoundError(runId);
    return this.redactor.command(
      (await this.commands.listForRun(runId)).find((c) => c.idempotencyKey === key),
    );
  }
}

function toSummary(r: Record<string, any>): AdminRunSummary {
  return {
    id: r.id,
    kind: r.kind,
    status: r.status,
    cursor: r.cursor,
    epoch: Number(r.epoch),
    workerId: r.worker_id,
    attempts: r.attempts,
    maxAttempts: r.max_attempts,
    parkedReason: r.parked_reason,
    errorMessage: r.error_message,
    inDoubtCommands: r.in_doubt,
    awaitingApproval: r.awaiting_approval,
    availableAt: r.available_at,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    finishedAt: r.finished_at,
  };
}
