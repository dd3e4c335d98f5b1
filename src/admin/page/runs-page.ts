import type { KindVersionView } from '../../interfaces/run.interface';
import type { RunStats } from '../../store/run-stats.reader';
import type { AdminRunPage } from '../admin-runs.service';
import type { ListRunsQueryDto } from '../dto/list-runs-query.dto';
import { RUN_STATUSES } from '../dto/list-runs-query.dto';
import { badge, dur, html, layout, raw, Raw, ts } from './html';

/** The query string of a list page with `change` applied (undefined removes a filter). */
function query(
  q: ListRunsQueryDto,
  change: Partial<Record<keyof ListRunsQueryDto, string | undefined>>,
): string {
  const p = new URLSearchParams();
  const cur: Record<string, string | undefined> = {
    status: q.status?.join(','),
    kind: q.kind,
    deadLettered: q.deadLettered === undefined ? undefined : String(q.deadLettered),
    inDoubt: q.inDoubt === undefined ? undefined : String(q.inDoubt),
    createdFrom: q.createdFrom?.toISOString(),
    createdTo: q.createdTo?.toISOString(),
    limit: q.limit === undefined ? undefined : String(q.limit),
  };
  for (const [k, v] of Object.entries({ ...cur, ...change })) if (v !== undefined && v !== '') p.set(k, v);
  const s = p.toString();
  return s ? `?${s}` : '';
}

function where(r: AdminRunPage['items'][number]): string {
  const c = r.cursor;
  if (!c || c.name === null) return `step ${c?.step ?? 0}`;
  return `${c.step}: ${c.name} (${c.status})`;
}

/** A small table in a card above the runs: its header cells, then its rows. */
function cardTable(headers: string[], rows: Raw[]): Raw {
  return html`<table class="card">
    <thead>
      <tr>
        ${headers.map((h) => html`<th>${h}</th>`)}
      </tr>
    </thead>
    <tbody>
      ${rows}
    </tbody>
  </table>`;
}

/** The `@DurableCron` schedules with their ticks (nothing when there are none). */
function schedulesCard(schedules: RunStats['schedules']): Raw | string {
  if (!schedules.length) return '';
  const rows = schedules.map(
    (x) =>
      html`<tr data-testid="schedule-row">
        <td class="mono">${x.name}</td>
        <td class="mono">${x.paused ? 'paused' : ts(x.nextAt)}</td>
        <td class="mono">${x.lastAt ? ts(x.lastAt) : 'none yet'}</td>
      </tr>`,
  );
  return cardTable(['schedule', 'next tick', 'last tick'], rows);
}

/**
 * Each version of each kind with the unfinished runs pinned to it and the live workers running it; shown
 * once a kind has a version other than 1 (or runs not pinned yet), so unversioned apps see nothing.
 */
function versionsCard(versions: KindVersionView[]): Raw | string {
  if (!versions.some((v) => v.version !== 1)) return '';
  const rows = versions.map(
    (v) =>
      html`<tr data-testid="version-row">
        <td>${v.kind}</td>
        <td class="num">${v.version ?? 'not pinned'}</td>
        <td class="num">${v.pending}</td>
        <td class="num">${v.waiting}</td>
        <td class="num">${v.running}</td>
        <td class="num">${v.held}</td>
        <td class="num">${v.workers}</td>
      </tr>`,
  );
  return cardTable(['kind', 'version', 'pending', 'waiting', 'running', 'held', 'live workers'], rows);
}

/** The runs table with status counts and filters. `base` is the inspector's own URL path. */
export function renderRunsPage(
  base: string,
  operator: string,
  q: ListRunsQueryDto,
  page: AdminRunPage,
  stats: RunStats,
  signOut = false,
  versions: KindVersionView[] = [],
): string {
  const total = Object.values(stats.byStatus).reduce((a, b) => a + b, 0);
  const counts = RUN_STATUSES.map(
    (s) =>
      html`<a class="c" href="${base}${query(q, { status: s, after: undefined })}" data-testid="count-${s}"
        >${badge(s)}<b>${stats.byStatus[s] ?? 0}</b></a
      >`,
  );
  const rows = page.items.map(
    (r) =>
      html`<tr data-testid="run-row" data-run-id="${r.id}">
        <td><a class="mono" href="${base}/runs/${r.id}">${r.id.slice(0, 8)}</a></td>
        <td>${r.kind}</td>
        <td>
          ${badge(r.status)}${r.awaitingApproval ? raw(' <span class="badge s-awaiting_approval">approval</span>') : ''}${
            r.inDoubtCommands ? raw(' <span class="badge s-in_doubt">in doubt</span>') : ''
          }${r.held ? raw(' <span class="badge s-held" data-testid="held">held</span>') : ''}
        </td>
        <td>${where(r)}</td>
        <td class="num">${r.epoch}</td>
        <td class="num">${r.attempts}/${r.maxAttempts}</td>
        <td class="mono">${ts(r.createdAt)}</td>
        <td>
          ${r.finishedAt ? dur(new Date(r.finishedAt).getTime() - new Date(r.createdAt).getTime()) : ''}
        </td>
        <td class="muted">${r.parkedReason ?? r.errorMessage ?? ''}</td>
      </tr>`,
  );
  const body = html`<h1>Runs</h1>
    <div class="muted">
      ${total} run${total === 1 ? '' : 's'} · ${stats.queueDepth} due now (oldest waited
      ${dur(stats.oldestDueAgeMs)}) · ${stats.inDoubtCommands} command(s) in doubt
      ${Object.entries(stats.dueWithoutWorker).map(
        ([kind, n]) => html` · <b>${n} due of kind ${kind} with no live worker</b>`,
      )}
      ${Object.entries(stats.heldBack).map(
        ([scope, n]) => html` · <span data-testid="held-back">${n} held back by the limit ${scope}</span>`,
      )}
    </div>
    ${schedulesCard(stats.schedules)} ${versionsCard(versions)}
    <div class="counts">
      <a class="c" href="${base}${query(q, { status: undefined })}"
        ><span class="badge">all</span><b>${total}</b></a
      >
      ${counts}
    </div>
    <form class="filters card" method="get" action="${base}">
      <label
        >status <input name="status" value="${q.status?.join(',') ?? ''}" placeholder="failed,waiting"
      /></label>
      <label>kind <input name="kind" value="${q.kind ?? ''}" /></label>
      <label
        ><input type="checkbox" name="deadLettered" value="true" ${q.deadLettered ? 'checked' : ''} />
        dead-lettered</label
      >
      <label
        ><input type="checkbox" name="inDoubt" value="true" ${q.inDoubt ? 'checked' : ''} /> in doubt</label
      >
      <button type="submit">Filter</button> <a href="${base}">clear</a>
    </form>
    <table>
      <thead>
        <tr>
          <th>run</th>
          <th>kind</th>
          <th>status</th>
          <th>where</th>
          <th>epoch</th>
          <th>attempts</th>
          <th>created (UTC)</th>
          <th>took</th>
          <th>note</th>
        </tr>
      </thead>
      <tbody>
        ${
          rows.length
            ? rows
            : html`<tr>
                <td colspan="9" class="muted">No runs match.</td>
              </tr>`
        }
      </tbody>
    </table>
    ${page.next ? html`<p><a href="${base}${query(q, { after: page.next })}" data-testid="next-page">Next page →</a></p>` : ''}`;
  return layout('Durable runs', base, operator, body, { api: `${base}/api` }, signOut);
}
