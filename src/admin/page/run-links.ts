import type { AdminRunDetail } from '../admin-runs.service';
import { html, Raw } from './html';

/**
 * The run's parent and the children it started (from the `child.started` events shown), the run it was
 * forked from and its forks (from the `run.forked` events shown), as links.
 */
export function family(base: string, d: AdminRunDetail): Raw | string {
  const kids = d.events
    .filter((e) => e.type === 'child.started')
    .map((e) => e.payload as { child: string; kind: string });
  const link = (id: string, label: string) => html`<a class="mono" href="${base}/runs/${id}">${label}</a>`;
  const forks = d.events
    .filter((e) => e.type === 'run.forked')
    .map((e) => e.payload as { fork: string; fromStep: number });
  const from = d.run.forkedFrom;
  return html`${
    from
      ? html`<div>forked from</div>
          <div data-testid="forked-from">
            ${link(from.runId, from.runId.slice(0, 8))} at step ${from.fromStep}
          </div>`
      : ''
  }
  ${
    forks.length
      ? html`<div>forks</div>
          <div data-testid="forks">
            ${forks.map((f) => html`${link(f.fork, `${f.fork.slice(0, 8)} (from step ${f.fromStep})`)} `)}
          </div>`
      : ''
  }
  ${
    d.run.parentId
      ? html`<div>parent</div>
          <div data-testid="parent">${link(d.run.parentId, d.run.parentId.slice(0, 8))}</div>`
      : ''
  }
  ${
    kids.length
      ? html`<div>children</div>
          <div data-testid="children">
            ${kids.map((k) => html`${link(k.child, `${k.kind} ${k.child.slice(0, 8)}`)} `)}
          </div>`
      : ''
  }`;
}
