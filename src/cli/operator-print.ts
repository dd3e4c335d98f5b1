import type { AdminRunDetail, AdminRunPage } from '../admin/admin-runs.service';
import type { CommandView } from '../interfaces/command.interface';
import type { WorkerReleaseResult } from '../interfaces/lease.interface';
import type { KindVersionView, RunView } from '../interfaces/run.interface';
import type { WorkerRow } from '../store/worker-presence.store';
import type { ScheduleView } from '../api/durable-schedules.service';
import { printable } from './printable';

/** Prints one line; operatorCommand's passes every line through `printable`. */
type Out = (line: string) => void;

/** A time as ISO text (UTC); `-` for none, `never` for PostgreSQL's infinity (a wait with no timeout). */
function at(d: Date | string | number | null | undefined): string {
  if (d === null || d === undefined) return '-';
  const t = new Date(d);
  return Number.isNaN(t.getTime()) ? 'never' : t.toISOString();
}

/** A value on one line, cut at 200 characters. */
function brief(v: unknown): string {
  const text = typeof v === 'string' ? v : (JSON.stringify(v) ?? 'undefined');
  const line = text.replace(/\s*\n\s*/g, ' ');
  return line.length > 200 ? `${line.slice(0, 197)}...` : line;
}

/** Rows as columns padded to their widest cell, each cell `printable` first (so the columns line up). */
function table(out: Out, head: string[], cells: string[][]): void {
  const rows = cells.map((r) => r.map(printable));
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  for (const r of [head, ...rows])
    out(
      r
        .map((c, i) => c.padEnd(widths[i]))
        .join('  ')
        .trimEnd(),
    );
}

/** The list: one line per run, and how to ask for the next page. */
export function printList(out: Out, page: AdminRunPage): void {
  if (!page.items.length) {
    out('no runs match');
    return;
  }
  table(
    out,
    ['ID', 'KIND', 'STATUS', 'STEP', 'ATTEMPTS', 'WORKER', 'CREATED', 'NOTE'],
    page.items.map((r) => {
      const notes = [
        r.inDoubtCommands ? `${r.inDoubtCommands} command(s) in doubt` : '',
        r.awaitingApproval ? `${r.awaitingApproval} awaiting approval` : '',
        r.parkedReason ?? '',
        r.errorMessage ?? '',
      ].filter(Boolean);
      return [
        r.id,
        r.kind,
        r.held ? `${r.status} (held)` : r.status,
        String(r.cursor.step),
        `${r.attempts}/${r.maxAttempts}`,
        r.workerId ?? '-',
        at(r.createdAt),
        brief(notes.join('; ')),
      ];
    }),
  );
  if (page.next) out(`more: --after ${page.next}`);
}

/** A run's row, as the header of `show` and the answer of an action. */
export function printRun(out: Out, run: RunView | null | undefined): void {
  if (!run) return;
  out(`run ${run.id}  kind ${run.kind}  status ${run.status}${run.held ? ' (held)' : ''}`);
  out(
    `  epoch ${run.epoch}  attempts ${run.attempts}/${run.maxAttempts}  step ${run.cursor.step}` +
      (run.workerId ? `  worker ${run.workerId} (lease until ${at(run.leaseExpiresAt)})` : ''),
  );
  out(`  created ${at(run.createdAt)}  updated ${at(run.updatedAt)}  finished ${at(run.finishedAt)}`);
  if (run.status === 'waiting' || run.status === 'pending') out(`  due ${at(run.availableAt)}`);
  if (run.idempotencyKey !== null) out(`  idempotency key: ${brief(run.idempotencyKey)}`);
  out(`  input: ${brief(run.input)}`);
  if (run.output !== null) out(`  output: ${brief(run.output)}`);
  if (run.error) out(`  error: ${brief(run.error.message ?? run.error)}`);
  if (run.forkedFrom) out(`  forked from ${run.forkedFrom.runId} at step ${run.forkedFrom.fromStep}`);
  if (run.parkedReason) out(`  parked: ${brief(run.parkedReason)}`);
  if (run.held)
    out('  held on non-determinism: deploy code that replays it, then retry it (or retry-held KIND)');
  if (run.cancelRequestedAt)
    out(`  cancel requested ${at(run.cancelRequestedAt)}: ${brief(run.cancelReason)}`);
}

/** A command's outcome as `show` prints it: its result or error once settled. */
function outcomeOf(c: CommandView): string {
  if (c.status === 'succeeded') return brief(c.result);
  return c.status === 'failed' ? brief(c.error) : '';
}

/**
 * `show`: the run, its steps (with how often each ran), its commands and its event trail; `hidden`: how
 * many engine entries were left out of the steps (withoutEngineEntries).
 */
export function printDetail(out: Out, d: AdminRunDetail, hidden = 0): void {
  printRun(out, d.run);
  const { steps, workers, takeovers } = d.timeline;
  out(`  workers ${workers.join(', ') || '-'}  takeovers ${takeovers}`);
  out('');
  const notes = [
    d.checkpointsBefore !== undefined ? 'older ones not shown' : '',
    hidden ? `${hidden} engine entr${hidden === 1 ? 'y' : 'ies'} hidden: --all shows them` : '',
  ];
  out(`steps (${[steps.length, ...notes.filter(Boolean)].join(', ')}):`);
  if (steps.length)
    table(
      out,
      ['  #', 'NAME', 'KIND', 'STATE', 'EPOCH', 'RAN', 'MS'],
      steps.map((s) => [
        `  ${s.index}`,
        s.name,
        s.kind,
        s.state,
        String(s.epoch),
        String(s.executions),
        s.durationMs === null ? '-' : String(s.durationMs),
      ]),
    );
  out('');
  out(`commands (${d.commands.length}):`);
  if (d.commands.length)
    table(
      out,
      ['  STEP', 'NAME', 'STATUS', 'KEY', 'OUTCOME'],
      d.commands.map((c) => [`  #${c.stepIndex}`, c.name, c.status, c.idempotencyKey, outcomeOf(c)]),
    );
  out('');
  out(`events (${d.events.length}${d.eventsBefore !== undefined ? ', newest shown' : ''}):`);
  for (const e of d.events)
    out(`  ${at(e.createdAt)}  #${e.id}  ${e.type}  epoch ${e.epoch}  ${brief(e.payload)}`);
}

/** A command after an operator's decision on it. */
export function printCommand(out: Out, c: CommandView | undefined): void {
  if (c) out(`command ${c.idempotencyKey} (${c.name}, step ${c.stepIndex}): ${c.status}`);
}

/** `workers`: every presence row and every worker holding runs. */
export function printWorkers(out: Out, rows: WorkerRow[]): void {
  if (!rows.length) {
    out('no workers: none has a presence row or holds a run');
    return;
  }
  table(
    out,
    ['WORKER', 'LIVE', 'RUNNING', 'KINDS', 'SEEN', 'EXPIRES'],
    rows.map((w) => [
      w.workerId,
      w.live ? 'yes' : 'no',
      String(w.running),
      w.kinds
        ? w.kinds.map((k) => k + (w.versions?.[k] ? `@${w.versions[k].join('+')}` : '')).join(',') || '-'
        : '(no presence row)',
      at(w.seenAt),
      at(w.expiresAt),
    ]),
  );
}

/** `versions`: each version of each kind with the runs it holds and the workers that run it. */
export function printVersions(out: Out, rows: KindVersionView[]): void {
  if (!rows.length) {
    out('no unfinished runs and no live workers');
    return;
  }
  table(
    out,
    ['KIND', 'VERSION', 'PENDING', 'WAITING', 'RUNNING', 'HELD', 'WORKERS'],
    rows.map((v) => [
      v.kind,
      v.version === null ? '(not pinned)' : String(v.version),
      ...[v.pending, v.waiting, v.running, v.held, v.workers].map(String),
    ]),
  );
}

/** `schedules`, `pause`, `resume`: each schedule with its ticks. */
export function printSchedules(out: Out, rows: ScheduleView[]): void {
  if (!rows.length) {
    out('no schedules: no process that registers a @DurableCron workflow has started');
    return;
  }
  table(
    out,
    ['SCHEDULE', 'KIND', 'CRON', 'TIMEZONE', 'NEXT', 'LAST', 'PAUSED'],
    rows.map((s) => [
      s.name,
      s.kind,
      s.cron,
      s.timezone,
      at(s.nextAt),
      at(s.lastAt),
      s.paused ? 'yes' : 'no',
    ]),
  );
}

/** `release-worker`: what became of each run it held. */
export function printReleased(out: Out, workerId: string, released: WorkerReleaseResult[]): void {
  out(`released ${released.length} run(s) of worker ${workerId}`);
  for (const r of released)
    out(
      `  ${r.runId}  ${r.status}  due ${at(r.availableAt)}` +
        (r.callInFlight ? '  (a call may be in flight: due at its old lease deadline)' : '') +
        (r.inDoubt.length ? `  in doubt: ${r.inDoubt.join(', ')}` : ''),
    );
}
