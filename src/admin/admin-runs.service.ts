import { Injectable, MessageEvent } from '@nestjs/common';
import type { Observable } from 'rxjs';
import { runEventStream, type SseSocket } from '../api/run-sse';
import type { StreamEntry } from '../interfaces/stream.interface';
import { RunNotFoundError } from '../errors/run-not-found.error';
import type { CommandView } from '../interfaces/command.interface';
import type {
  CheckpointView,
  RunEvent,
  RunHistoryQuery,
  RunStatus,
  RunView,
} from '../interfaces/run.interface';
import { AdminRunsStore, AdminRunSummary, MeasuredCheckpoint } from '../store/admin-runs.store';
import { CommandStore } from '../store/command.store';
import { RunStats, RunStatsReader } from '../store/run-stats.reader';
import { CommandGateway } from '../api/command-gateway.service';
import { RunRepository } from '../api/run.repository';
import { requireText, requireTimestamp } from '../util/arguments';
import { requireTags } from '../util/run-keys';
import { pageByPosition, pageOfRuns, requireHistoryRange } from '../util/run-cursor';
import { AdminRedactor } from './admin-redactor';
import type { ListRunsQueryDto } from './dto/list-runs-query.dto';
import { changesToken, DETAIL_HISTORY_LIMIT, RunHistoryQueryDto } from './dto/run-history-query.dto';
import { buildTimeline, RunTimeline } from './run-timeline';

export type { AdminRunSummary } from '../store/admin-runs.store';
/** One page of the admin list; `next` is absent on the last page. */
export interface AdminRunPage {
  items: AdminRunSummary[];
  next?: string;
}

/**
 * One run: the row, its newest checkpoints, commands and events (at most `limit` of each; older ones are
 * paged with `GET .../events?before=`, `.../checkpoints?before=` and `.../commands?before=`), and the
 * timeline built from what is shown.
 */
export interface AdminRunDetail {
  run: RunView;
  /** The newest `limit` checkpoints, in step order. */
  checkpoints: CheckpointView[];
  /**
   * The newest `limit` commands and every older one that may need an operator (pending, in doubt,
   * awaiting approval), in step order.
   */
  commands: CommandView[];
  /** The newest `limit` events, oldest first. */
  events: RunEvent[];
  timeline: RunTimeline;
  /** The most events and checkpoints shown (the `limit` asked for; default 200). */
  limit: number;
  /** Set when older events exist: pass it as `before` to `GET .../events` (newest first). */
  eventsBefore?: number;
  /** Set when older checkpoints exist: pass it as `before` to `GET .../checkpoints`. */
  checkpointsBefore?: number;
  /** Set when older commands exist: pass it as `before` to `GET .../commands`. */
  commandsBefore?: number;
  /** For `GET .../changes?since=`: this state of the run. */
  token: string;
}

/** One page of a run's events, checkpoints or commands; `next` (for the same `after` or `before`) is absent on the last page. */
export interface AdminRunHistoryPage<T> {
  /** Oldest first after `after` (or from the oldest), newest first before `before`. */
  items: T[];
  /** The event id (or step index) to pass as the same `after` or `before` for the next page. */
  next?: number;
}

/** Whether a run changed since a token: its row (status, cursor, lease...) or its events. */
export interface AdminRunChanges {
  /** Whether the run's row or events differ from the state `since` named (true without `since`). */
  changed: boolean;
  /** The token of the run as it is now, for the next `since`. */
  token: string;
  /** The run's status now (a page reloads when it moved on). */
  status: RunStatus;
  /** The newest event's id (null: none), for `GET .../events?after=`. */
  lastEventId: number | null;
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
    private readonly commandStore: CommandStore,
  ) {}

  /** The run's stream as SSE, each entry's data through the redact hook; RunNotFoundError first. */
  async stream(id: string, lastEventId?: string, socket?: SseSocket): Promise<Observable<MessageEvent>> {
    const data = (e: StreamEntry) => this.redactor.streamEntry(e);
    return runEventStream(this.runs, id, { lastEventId, data, socket });
  }

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
        tags: requireTags(tagsOf(q.tag), 'tag'),
      };
      return this.store.list(filter, after, take);
    });
    return { items: page.items.map((s) => this.redactor.summary(s)), next: page.next };
  }

  stats(): Promise<RunStats> {
    return this.statsReader.read();
  }

  /**
   * The run with its newest `limit` events, checkpoints (with their outputs unless `outputs` is false)
   * and commands (and the first `limit` older ones that may need an operator); RunNotFoundError (404)
   * for an unknown id. The token is read first, so a change while the rest is read shows on the next poll.
   */
  async detail(id: string, limit = DETAIL_HISTORY_LIMIT, outputs = true): Promise<AdminRunDetail> {
    const version = await this.requireRun(id);
    const newest = { newestFirst: true };
    // Values over limits.maxShownValueBytes are measured in SQL, never read nor redacted (shown-value.ts).
    const readCheckpoints = (q: RunHistoryQuery) =>
      this.store.shownCheckpoints(id, requireHistoryRange(q), this.redactor.maxShownValueBytes, outputs);
    const [stored, cps, cmds, open, evs] = await Promise.all([
      this.runs.get(id),
      pageByPosition(newest, limit, readCheckpoints, byCheckpointStep),
      pageByPosition(newest, limit, (q) => this.commandStore.page(id, requireHistoryRange(q)), byStep),
      // Bounded like the rest: the first `limit` commands that may need an operator (the others are in
      // the commands pages, `GET api/runs/:id/commands`).
      this.commandStore.unsettled(id, limit),
      pageByPosition(newest, limit, (q) => this.runs.events(id, q), byId),
    ]);
    if (!stored) throw new RunNotFoundError(id);
    const r = this.redactor;
    const checkpoints = cps.items.reverse().map((c) => r.shownCheckpoint(c));
    const events = evs.items.reverse().map((e) => r.event(e));
    const shown = cmds.items.reverse();
    const older = open.filter((c) => c.stepIndex < (shown[0]?.stepIndex ?? Infinity));
    const window = { olderEvents: evs.next !== undefined, olderCheckpoints: cps.next !== undefined };
    return {
      run: r.run(stored),
      checkpoints,
      commands: [...older, ...shown].map((c) => r.command(c)),
      events,
      timeline: buildTimeline(events, checkpoints, window),
      limit,
      eventsBefore: evs.next,
      checkpointsBefore: cps.next,
      commandsBefore: cmds.next,
      token: changesToken(version.rowVersion, version.lastEventId),
    };
  }

  /**
   * A page of the run's events by id (`after`: oldest first, `before`: newest first), redacted;
   * RunNotFoundError for an unknown run (looked up only when the page is empty).
   */
  events(id: string, q: RunHistoryQueryDto): Promise<AdminRunHistoryPage<RunEvent>> {
    return this.history(
      id,
      q,
      (p) => this.runs.events(id, p),
      byId,
      (e) => this.redactor.event(e),
    );
  }

  /** A page of the run's checkpoints by step index (as `events`), redacted, large values as markers. */
  checkpoints(id: string, q: RunHistoryQueryDto): Promise<AdminRunHistoryPage<CheckpointView>> {
    const read = (p: RunHistoryQuery) =>
      this.store.shownCheckpoints(id, requireHistoryRange(p), this.redactor.maxShownValueBytes);
    return this.history(id, q, read, byCheckpointStep, (c) => this.redactor.shownCheckpoint(c));
  }

  /** A page of the run's commands by step index (as `events`), redacted. */
  commandsPage(id: string, q: RunHistoryQueryDto): Promise<AdminRunHistoryPage<CommandView>> {
    const read = (p: RunHistoryQuery) => this.commandStore.page(id, requireHistoryRange(p));
    return this.history(id, q, read, byStep, (c) => this.redactor.command(c));
  }

  /** One page by position, redacted; the run is looked up (404) only when the page is empty. */
  private async history<T, U = T>(
    id: string,
    { after, before, limit = DETAIL_HISTORY_LIMIT }: RunHistoryQueryDto,
    read: (q: RunHistoryQuery) => Promise<T[]>,
    positionOf: (item: T) => number,
    redact: (item: T) => U,
  ): Promise<AdminRunHistoryPage<U>> {
    const page = await pageByPosition({ after, before }, limit, read, positionOf);
    if (!page.items.length) await this.requireRun(id);
    return { items: page.items.map(redact), next: page.next };
  }

  /** Whether the run changed since `since` (a token): one indexed read, no run data. */
  async changes(id: string, since: string | undefined): Promise<AdminRunChanges> {
    const v = await this.requireRun(id);
    const token = changesToken(v.rowVersion, v.lastEventId);
    return { changed: token !== since, token, status: v.status, lastEventId: v.lastEventId };
  }

  private async requireRun(id: string) {
    const version = await this.store.version(id);
    if (!version) throw new RunNotFoundError(id);
    return version;
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
    // One row by its key: a run with 70,000 commands is not read whole to act on one.
    return this.redactor.command(await this.commandStore.ofRun(runId, key));
  }
}

const byId = (e: RunEvent) => e.id;
const byStep = (c: { stepIndex: number }) => c.stepIndex;
const byCheckpointStep = (c: MeasuredCheckpoint) => c.checkpoint.stepIndex;

/** `['tenant=acme', …]` → `{ tenant: 'acme', … }` (split at the first `=`), or undefined for none. */
function tagsOf(tags: string[] | undefined): Record<string, string> | undefined {
  if (!tags?.length) return undefined;
  return Object.fromEntries(tags.map((t) => [t.slice(0, t.indexOf('=')), t.slice(t.indexOf('=') + 1)]));
}
