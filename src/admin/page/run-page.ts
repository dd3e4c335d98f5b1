import { TERMINAL_STATUSES } from '../../interfaces/run.interface';
import type { CommandView } from '../../interfaces/command.interface';
import type { AdminRunDetail } from '../admin-runs.service';
import { badge, dur, html, layout, Raw, raw } from './html';
import { renderSteps, renderTimeline } from './timeline-view';
import { family } from './run-links';

const json = (v: unknown) => JSON.stringify(v);
const pretty = (v: unknown) => JSON.stringify(v, null, 2);
const button = (action: string, label: string, body: unknown = {}, cls = '') =>
  html`<button type="button" class="${cls}" data-action="${action}" data-body="${json(body)}">
    ${label}
  </button>`;

/** Buttons for what an operator can do to this command now. */
function commandActions(c: CommandView): Raw | string {
  if (c.status === 'awaiting_approval') {
    return html`<form class="inline" data-testid="approval-${c.stepIndex}">
      <input name="note" placeholder="note (optional)" />
      ${button('approve', 'Approve', { key: c.idempotencyKey }, 'primary')}
      ${button('reject', 'Reject', { key: c.idempotencyKey }, 'danger')}
    </form>`;
  }
  if (c.status === 'in_doubt') {
    return html`<form class="inline" data-testid="resolve-${c.stepIndex}">
        <input name="result" data-json placeholder='result JSON, e.g. {"chargeId":"ch_1"}' />
        ${button('resolve', 'It succeeded', { key: c.idempotencyKey, outcome: 'succeeded' }, 'primary')}
      </form>
      <form class="inline">
        <input name="error" placeholder="why it failed" />
        ${button('resolve', 'It failed', { key: c.idempotencyKey, outcome: 'failed' }, 'danger')}
      </form>
      ${button('resolve', 'Send again with the same key', { key: c.idempotencyKey, outcome: 'retry' })}`;
  }
  return '';
}

function runActions(d: AdminRunDetail): Raw {
  const s = d.run.status;
  const live = !TERMINAL_STATUSES.includes(s);
  return html`<div class="card">
    ${
      live
        ? html`<form class="inline">
              <input name="reason" placeholder="reason" />${button('cancel', 'Cancel run', {}, 'danger')}
            </form>
            <form class="inline">
              <input name="name" placeholder="signal name" />
              <input name="payload" data-json placeholder="payload JSON (optional)" />
              ${button('signal', 'Send signal')}
            </form>`
        : ''
    }
    ${
      s === 'dead_lettered' || s === 'failed'
        ? button('retry', 'Retry from the last checkpoint', {}, 'primary')
        : ''
    }
    ${live ? html`<label class="muted"><input type="checkbox" id="auto-refresh" checked /> live</label>` : ''}
    ${!live && s !== 'dead_lettered' && s !== 'failed' ? html`<span class="muted">Finished: no action applies.</span>` : ''}
  </div>`;
}

/** Says that only the newest entries are shown, with a link to the API page of older ones. */
function older(
  api: string,
  what: 'events' | 'checkpoints' | 'commands',
  d: AdminRunDetail,
  before?: number,
): Raw | string {
  if (before === undefined) return '';
  return html`<p class="muted" data-testid="older-${what}">
    Showing the newest ${d.limit}
    ${what}${what === 'commands' ? ' (and every older one an operator must decide)' : ''}; older ones:
    <a href="${api}/${what}?before=${before}">${what}?before=${before}</a> (JSON, newest first).
  </p>`;
}

/** Where events that arrive while the page is open are appended by the page script. */
const LIVE_EVENTS = html`<div id="live" hidden>
  <h3>New since this page loaded</h3>
  <table>
    <tbody id="live-events"></tbody>
  </table>
</div>`;

/** Where the page script shows the run's progress stream (`ctx.emit`), followed live over SSE. */
const PROGRESS = html`<div id="progress" hidden>
  <h3>Progress stream</h3>
  <table>
    <tbody id="progress-entries"></tbody>
  </table>
</div>`;

/** One run: summary, actions, commands, steps with durations and the epoch-by-epoch timeline. */
export function renderRunPage(base: string, operator: string, d: AdminRunDetail, signOut = false): string {
  const r = d.run;
  const t = d.timeline;
  const api = `${base}/api/runs/${r.id}`;
  const live = !TERMINAL_STATUSES.includes(r.status);
  const shown = d.eventsBefore === undefined ? '' : ' in the events shown';
  const took =
    (r.finishedAt ? new Date(r.finishedAt) : new Date()).getTime() - new Date(r.createdAt).getTime();
  const commands = d.commands.map(
    (c) =>
      html`<tr data-testid="command" data-status="${c.status}">
        <td class="num">${c.stepIndex}</td>
        <td>${c.name}</td>
        <td>${badge(c.status)}</td>
        <td class="mono">${c.idempotencyKey}</td>
        <td class="num">${c.epoch}</td>
        <td>${commandActions(c)}</td>
      </tr>`,
  );
  const body = html`<p class="muted"><a href="${base}">← all runs</a></p>
    <h1>
      ${r.kind} <span class="mono muted">${r.id}</span> ${badge(r.status, 'run-status')}${
        r.held ? raw(' <span class="badge s-held" data-testid="held">held</span>') : ''
      }
    </h1>
    <div class="card kv">
      <div>where</div>
      <div>step ${r.cursor.step}${r.cursor.name ? `: ${r.cursor.name} (${r.cursor.status})` : ''}</div>
      <div>epoch · attempts</div>
      <div>${r.epoch} · ${r.attempts}/${r.maxAttempts}</div>
      <div>workers</div>
      <div data-testid="workers">${t.workers.length} (${t.workers.join(', ')})${shown}</div>
      <div>takeovers</div>
      <div data-testid="takeovers">${t.takeovers}${shown}</div>
      <div>${r.finishedAt ? 'took' : 'age'}</div>
      <div>${dur(took)}</div>
      ${family(base, d)}
      ${
        r.parkedReason
          ? html`<div>parked</div>
              <div>${r.parkedReason}</div>`
          : ''
      }
      ${
        r.cancelReason
          ? html`<div>cancel reason</div>
              <div>${r.cancelReason}</div>`
          : ''
      }
      ${
        r.error
          ? html`<div>error</div>
              <div class="mono">${r.error.code ?? r.error.name ?? ''} ${r.error.message}</div>`
          : ''
      }
      ${
        r.idempotencyKey
          ? html`<div>idempotency key</div>
              <div class="mono">${r.idempotencyKey}</div>`
          : ''
      }
    </div>
    ${runActions(d)}
    <h2>Commands</h2>
    ${older(api, 'commands', d, d.commandsBefore)}
    ${
      commands.length
        ? html`<table>
            <thead>
              <tr>
                <th>step</th>
                <th>command</th>
                <th>status</th>
                <th>key</th>
                <th>epoch</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              ${commands}
            </tbody>
          </table>`
        : html`<p class="muted">No side-effect commands.</p>`
    }
    <h2>Steps</h2>
    ${older(api, 'checkpoints', d, d.checkpointsBefore)}
    ${renderSteps(t, { live, rewindable: r.status === 'failed' || r.status === 'dead_lettered' })}
    <h2>Timeline</h2>
    ${older(api, 'events', d, d.eventsBefore)} ${renderTimeline(t, r.createdAt)} ${PROGRESS}
    ${live ? LIVE_EVENTS : ''}
    <h2>Input and output</h2>
    <div class="card">
      <div class="muted">input</div>
      <pre class="mono">${pretty(r.input)}</pre>
      ${
        r.output !== null
          ? html`<div class="muted">output</div>
              <pre class="mono">${pretty(r.output)}</pre>`
          : raw('')
      }
    </div>`;
  return layout(
    `${r.kind} ${r.id.slice(0, 8)} · ${r.status}`,
    base,
    operator,
    body,
    {
      api,
      live: String(live),
      status: r.status,
      token: d.token,
      'last-event': String(d.events.length ? d.events[d.events.length - 1].id : 0),
    },
    signOut,
  );
}
