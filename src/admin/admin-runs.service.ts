import { Injectable } from '@nestjs/common';
import { RunNotFoundError } from '../errors/run-not-found.error';
import type { CommandView } from '../interfaces/command.interface';
import type { CheckpointView, RunEvent, RunView } from '../interfaces/run.interface';
import { AdminRunsStore, AdminRunSummary } from '../store/admin-runs.store';
import { RunStats, RunStatsReader } from '../store/run-stats.reader';
import { CommandGateway } from '../api/command-gateway.service';
import { RunRepository } from '../api/run.repository';
import { requireText, requireTimestamp } from '../util/arguments';
import { pageOfRuns } from '../util/run-cursor';
import { AdminRedactor } from './admin-redactor';
import type { ListRunsQueryDto } from './dto/list-runs-query.dto';
import { buildTimeline, RunTimeline } from './run-timeline';

export type { AdminRunSummary } from '../store/admin-runs.store';

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
    private readonly store: AdminRunsStore,
    private readonly statsReader: RunStatsReader,
    private readonly runs: RunRepository,
    private readonly commands: CommandGateway,
    private readonly redactor: AdminRedactor,
  ) {}

  async list(q: ListRunsQueryDto): Promise<AdminRunPage> {
    const limit = q.limit ?? 50;
    const page = await pageOfRuns(q.after || undefined, limit, (after, take) => {
      requireText(q.kind, 'kind', { optional: true });
      const filter = {
        statuses: q.status?.length ? q.status : null,
        kind: q.kind ?? null,
        createdFrom: q.createdFrom === undefined ? null : requireTimestamp(q.createdFrom, 'createdFrom'),
        createdTo: q.createdTo === undefined ? null : requireTimestamp(q.createdTo, 'createdTo'),
        deadLettered: q.deadLettered ?? null,
        inDoubt: q.inDoubt ?? null,
      };
      return this.store.list(filter, after, take);
    });
    return { items: page.items.map((s) => this.redactor.summary(s)), next: page.next };
  }

  stats(): Promise<RunStats> {
    return this.statsReader.read();
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
