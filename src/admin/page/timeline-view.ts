import type { RunEvent } from '../../interfaces/run.interface';
import type { EpochSection, RunTimeline } from '../run-timeline';
import { badge, dur, html, Raw, ts } from './html';

/** Payload fields worth a glance in the timeline, in this order. */
const FIELDS = [
  'name',
  'step',
  'kind',
  'key',
  'by',
  'note',
  'reason',
  'outcome',
  'workerId',
  'previousWorker',
  'attempt',
  'attempts',
  'delayMs',
  'error',
  'inDoubt',
  'checkpoints',
  'events',
];

function summary(e: RunEvent): string {
  const p = e.payload ?? {};
  const parts: string[] = [];
  for (const f of FIELDS) {
    const v = p[f];
    if (v === undefined || v === null || (Array.isArray(v) && !v.length)) continue;
    parts.push(`${f}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  }
  const usage = p.usage as Record<string, unknown> | undefined;
  if (usage && typeof usage === 'object') {
    const tokens = usage.total_tokens ?? usage.totalTokens ?? usage.prompt_tokens;
    if (tokens !== undefined) parts.push(`tokens=${String(tokens)}`);
  }
  const text = parts.join(' · ');
  return text.length > 220 ? `${text.slice(0, 217)}...` : text;
}

function tokensOf(usage: unknown): string {
  if (!usage || typeof usage !== 'object') return '';
  const u = usage as Record<string, unknown>;
  const input = u.prompt_tokens ?? u.input_tokens ?? u.inputTokens;
  const output = u.completion_tokens ?? u.output_tokens ?? u.outputTokens;
  return input === undefined && output === undefined
    ? ''
    : `${String(input ?? '?')} in / ${String(output ?? '?')} out`;
}

/**
 * "Fork from here" on a step (`POST .../fork`, docs/TIME-TRAVEL.md): an optional version, whether its
 * commands keep the original's keys, for a run that has not ended the choice about it (none chosen: the
 * API asks for it), and for a failed or dead-lettered one a rewind in place instead.
 */
function forkHere(index: number, live: boolean, rewindable: boolean): Raw {
  return html`<form class="inline" data-testid="fork-${index}">
    <input name="version" data-json size="4" placeholder="version" />
    ${
      live
        ? html`<select name="original">
            <option value="">the original…</option>
            <option value="leave">leave it running</option>
            <option value="cancel">cancel it</option>
          </select>`
        : ''
    }
    <label class="muted"><input type="checkbox" name="keepKeys" /> keep keys</label>
    ${rewindable ? html`<label class="muted"><input type="checkbox" name="inPlace" /> rewind in place</label>` : ''}
    <button type="button" data-action="fork" data-body="${JSON.stringify({ fromStep: index })}">
      Fork from here
    </button>
  </form>`;
}

/**
 * Steps with their kind, state, duration (bar relative to the longest), executions and model tokens;
 * with `fork`, a "Fork from here" form on each (`live`: the run has not ended; `rewindable`: it failed or
 * was dead-lettered).
 */
export function renderSteps(t: RunTimeline, fork?: { live: boolean; rewindable: boolean }): Raw {
  if (!t.steps.length) return html`<p class="muted">No step recorded yet.</p>`;
  const longest = Math.max(1, ...t.steps.map((s) => s.durationMs ?? 0));
  const rows = t.steps.map(
    (s) =>
      html`<tr data-testid="step" data-step="${s.index}" data-state="${s.state}">
        <td class="num">${s.index}</td>
        <td>${s.name}</td>
        <td>${s.kind}</td>
        <td>${badge(s.state)}</td>
        <td class="num">${s.epoch}</td>
        <td class="num">${dur(s.durationMs)}</td>
        <td style="width:22%">
          <div class="bar" style="width:${Math.round(((s.durationMs ?? 0) / longest) * 100)}%"></div>
        </td>
        <td class="num" title="times started (a step cut by a crash runs again)">
          ${s.executions > 1 ? `×${s.executions}` : ''}
        </td>
        <td>${tokensOf(s.usage)}</td>
        ${fork ? html`<td>${forkHere(s.index, fork.live, fork.rewindable)}</td>` : ''}
      </tr>`,
  );
  return html`<table>
    <thead>
      <tr>
        <th>#</th>
        <th>step</th>
        <th>kind</th>
        <th>state</th>
        <th>epoch</th>
        <th>took</th>
        <th></th>
        <th>runs</th>
        <th>model tokens</th>
        ${fork ? html`<th></th>` : ''}
      </tr>
    </thead>
    <tbody>
      ${rows}
    </tbody>
  </table>`;
}

function transition(s: EpochSection, prev: EpochSection | undefined): Raw | string {
  if (s.start === 'takeover') {
    const from = s.takeover?.previousWorker ?? prev?.workerId ?? 'the previous worker';
    const doubt = Array.isArray(s.takeover?.inDoubt) && (s.takeover!.inDoubt as unknown[]).length;
    return html`<div
      class="takeover"
      data-testid="takeover"
      data-from="${from}"
      data-to="${s.workerId ?? ''}"
    >
      <b>Takeover.</b> Worker <span class="mono">${from}</span> stopped renewing its lease (crashed or
      stalled); the reconciler handed the run back at
      ${ts(s.takeover?.detectedAt)}${doubt ? ' with its reserved command(s) marked in doubt' : ''}, and worker
      <span class="mono">${s.workerId ?? '?'}</span> resumed it as epoch ${s.epoch}: committed steps were
      replayed from their checkpoints, not run again.
    </div>`;
  }
  if (s.start === 'handover') {
    return html`<div class="takeover" data-testid="handover">
      <b>Handover.</b> Worker <span class="mono">${prev?.workerId ?? '?'}</span> released the run on shutdown
      (drain); worker <span class="mono">${s.workerId ?? '?'}</span> resumed it as epoch ${s.epoch}.
    </div>`;
  }
  return '';
}

const START_LABELS: Partial<Record<EpochSection['start'], string>> = {
  'first-claim': 'first claim',
  earlier: 'began before the events shown',
};

/** Events grouped by epoch, one colour per worker, with takeovers and handovers called out between. */
export function renderTimeline(t: RunTimeline, createdAt: Date): Raw {
  const t0 = new Date(createdAt).getTime();
  const sections = t.epochs.map((s, i) => {
    const w = s.workerId ? t.workers.indexOf(s.workerId) + 1 : 0;
    const title =
      s.epoch === 0
        ? 'Created'
        : html`Epoch ${s.epoch} · worker <span class="mono">${s.workerId ?? '?'}</span> ·
            ${START_LABELS[s.start] ?? s.start}`;
    const rows = s.events.map(
      (e) =>
        html`<tr data-testid="event" data-type="${e.type}">
          <td class="mono muted">+${dur(new Date(e.createdAt).getTime() - t0)}</td>
          <td class="mono">${ts(e.createdAt)}</td>
          <td><b>${e.type}</b></td>
          <td class="mono">${summary(e)}</td>
        </tr>`,
    );
    return html`${transition(s, t.epochs[i - 1])}
      <section
        class="epoch w${((w - 1) % 4) + 1}"
        data-testid="epoch"
        data-epoch="${s.epoch}"
        data-worker="${s.workerId ?? ''}"
      >
        <h3>${title}</h3>
        <table>
          <tbody>
            ${rows}
          </tbody>
        </table>
      </section>`;
  });
  return html`${sections}`;
}
