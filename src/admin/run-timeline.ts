import type { CheckpointView, RunEvent } from '../interfaces/run.interface';

/**
 * How an epoch began, relative to the one before it; `earlier` when that is before the oldest event
 * shown (a run detail shows only its newest events).
 */
export type EpochStart = 'created' | 'first-claim' | 'takeover' | 'handover' | 'resume' | 'earlier';

/** One claim of the run (an epoch) and the events recorded under it. */
export interface EpochSection {
  /** 0 holds what happened before the first claim. */
  epoch: number;
  workerId: string | null;
  claimedAt: Date | null;
  start: EpochStart;
  /** Set when this epoch took the run over from a worker whose lease expired (a crash or a stall). */
  takeover?: { previousWorker: string | null; detectedAt: Date; inDoubt: unknown };
  events: RunEvent[];
}

/** One position of the run: a step, a command, a recorded value or a wait, with its timing. */
export interface StepRow {
  index: number;
  name: string;
  kind: 'model' | 'tool' | 'compute' | 'command' | 'value' | 'wait';
  /**
   * `done` (checkpoint committed), `failed` (its failure recorded, or the claim that ran it ended in a
   * failure: the run failed, was dead-lettered or is due for a retry), `interrupted` (started, then the
   * claim ended otherwise: a crash, a drain, a cancel), `running`.
   */
  state: 'done' | 'failed' | 'interrupted' | 'running';
  epoch: number;
  startedAt: Date | null;
  committedAt: Date | null;
  durationMs: number | null;
  /** How many times it was started (a step cut by a crash runs again: at-least-once until committed). */
  executions: number;
  usage: unknown;
}

/** A run's history arranged for an operator: epochs (claims, takeovers) and steps with durations. */
export interface RunTimeline {
  epochs: EpochSection[];
  steps: StepRow[];
  /** Distinct workers that drove the run, in order. */
  workers: string[];
  takeovers: number;
}

const STARTS = new Set(['step.started', 'model.call_started', 'tool.command_reserved']);
/** Events that end a claim in a failure, and those that end it otherwise (a step started before them is not running). */
const FAILS = new Set(['run.failed', 'run.dead_lettered', 'run.retry_scheduled']);
const ENDS = new Set([
  'run.succeeded',
  'run.cancelled',
  'run.released',
  'run.held',
  'run.reconciled',
  'run.continued_as_new',
  'command.approval_requested',
  'command.in_doubt',
]);

/** The state of a step whose last start (`last`) has no checkpoint: what its claim did after it. */
function startedState(events: RunEvent[], last: RunEvent, lastEpoch: number): StepRow['state'] {
  const step = Number(last.payload?.step);
  const after = events.filter((e) => e.epoch === last.epoch && e.id > last.id);
  if (after.some((e) => FAILS.has(e.type) || (e.type === 'step.failed' && Number(e.payload?.step) === step)))
    return 'failed';
  return last.epoch < lastEpoch || after.some((e) => ENDS.has(e.type)) ? 'interrupted' : 'running';
}
const WAITS = /^\$(sleep|signal:|deadline:)/;

const time = (d: Date | string) => new Date(d).getTime();

function kindOf(cp: CheckpointView, saved: RunEvent | undefined): StepRow['kind'] {
  if (cp.stepName.startsWith('command:')) return 'command';
  if (WAITS.test(cp.stepName)) return 'wait';
  if (cp.stepName.startsWith('$')) return 'value';
  const k = saved?.payload?.kind;
  return k === 'model' || k === 'tool' ? k : 'compute';
}

/**
 * Which part of the run's history the timeline is built from: with older events or checkpoints not
 * given, the first epoch shown may have begun earlier, and start marks of steps older than the
 * checkpoints shown are not steps in flight.
 */
export interface TimelineWindow {
  olderEvents?: boolean;
  olderCheckpoints?: boolean;
}

/** Groups events by epoch and marks how each epoch began. */
function epochsOf(events: RunEvent[], olderEvents: boolean): EpochSection[] {
  const byEpoch = new Map<number, EpochSection>();
  for (const e of events) {
    let s = byEpoch.get(e.epoch);
    if (!s) {
      s = { epoch: e.epoch, workerId: null, claimedAt: null, start: 'resume', events: [] };
      byEpoch.set(e.epoch, s);
    }
    s.events.push(e);
    if (e.type === 'run.claimed' && !s.claimedAt) {
      s.workerId = (e.payload?.workerId as string) ?? null;
      s.claimedAt = e.createdAt;
    }
  }
  const sections = [...byEpoch.values()].sort((a, b) => a.epoch - b.epoch);
  sections.forEach((s, i) => {
    const prev = sections[i - 1];
    if (s.epoch === 0) s.start = 'created';
    else if (!prev && olderEvents) s.start = 'earlier';
    else if (!prev || prev.epoch === 0) s.start = 'first-claim';
    else {
      const reconciled = prev.events.find((e) => e.type === 'run.reconciled');
      if (reconciled) {
        s.start = 'takeover';
        s.takeover = {
          previousWorker: (reconciled.payload?.previousWorker as string) ?? prev.workerId,
          detectedAt: reconciled.createdAt,
          inDoubt: reconciled.payload?.inDoubt ?? [],
        };
      } else if (prev.events.some((e) => e.type === 'run.released')) s.start = 'handover';
    }
  });
  return sections;
}

/** Steps from checkpoints (committed) and start events (interrupted or running), in index order. */
function stepsOf(
  events: RunEvent[],
  checkpoints: CheckpointView[],
  lastEpoch: number,
  window: TimelineWindow,
): StepRow[] {
  const shownFrom = window.olderCheckpoints && checkpoints.length ? checkpoints[0].stepIndex : 0;
  const starts = events.filter((e) => STARTS.has(e.type) && !(Number(e.payload?.step) < shownFrom));
  const saved = new Map<number, RunEvent>();
  for (const e of events) if (e.type === 'run.checkpoint_saved') saved.set(Number(e.payload?.step), e);
  const rows = new Map<number, StepRow>();
  for (const cp of checkpoints) {
    const mine = starts.filter((e) => Number(e.payload?.step) === cp.stepIndex);
    const start = [...mine]
      .reverse()
      .find((e) => e.epoch === cp.epoch && time(e.createdAt) <= time(cp.createdAt));
    // A compute step has no start mark: it ran after whatever this claim recorded just before it
    // (unknown when that is the oldest event shown and older ones are not).
    const prior = [...events]
      .reverse()
      .find((e) => e.epoch === cp.epoch && time(e.createdAt) < time(cp.createdAt));
    const before = start ?? (window.olderEvents && prior === events[0] ? undefined : prior);
    rows.set(cp.stepIndex, {
      index: cp.stepIndex,
      name: cp.stepName,
      kind: kindOf(cp, saved.get(cp.stepIndex)),
      state: (cp.meta as { failed?: boolean } | null)?.failed ? 'failed' : 'done',
      epoch: cp.epoch,
      startedAt: before?.createdAt ?? null,
      committedAt: cp.createdAt,
      durationMs: before ? Math.max(0, time(cp.createdAt) - time(before.createdAt)) : null,
      executions: Math.max(1, mine.length),
      usage: (cp.meta as { usage?: unknown } | null)?.usage ?? null,
    });
  }
  for (const e of starts) {
    const index = Number(e.payload?.step);
    if (rows.has(index)) continue;
    const mine = starts.filter((s) => Number(s.payload?.step) === index);
    const last = mine[mine.length - 1];
    rows.set(index, {
      index,
      name: String(e.payload?.name ?? '?'),
      kind:
        e.type === 'model.call_started' ? 'model' : e.type === 'tool.command_reserved' ? 'command' : 'tool',
      state: startedState(events, last, lastEpoch),
      epoch: last.epoch,
      startedAt: last.createdAt,
      committedAt: null,
      durationMs: null,
      executions: mine.length,
      usage: null,
    });
  }
  return [...rows.values()].sort((a, b) => a.index - b.index);
}

/**
 * Builds the operator's view of a run's history from its events and checkpoints (oldest first; the
 * newest part of them when `window` says older ones exist).
 */
export function buildTimeline(
  events: RunEvent[],
  checkpoints: CheckpointView[],
  window: TimelineWindow = {},
): RunTimeline {
  const epochs = epochsOf(events, window.olderEvents === true);
  const lastEpoch = epochs.length ? epochs[epochs.length - 1].epoch : 0;
  const workers: string[] = [];
  for (const s of epochs) if (s.workerId && !workers.includes(s.workerId)) workers.push(s.workerId);
  return {
    epochs,
    steps: stepsOf(events, checkpoints, lastEpoch, window),
    workers,
    takeovers: epochs.filter((s) => s.start === 'takeover').length,
  };
}
