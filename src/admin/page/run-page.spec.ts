import type { RunEvent, RunView } from '../../interfaces/run.interface';
import type { AdminRunDetail } from '../admin-runs.service';
import { buildTimeline } from '../run-timeline';
import type { RunStats } from '../../store/run-stats.reader';
import { renderRunPage } from './run-page';
import { renderRunsPage } from './runs-page';

const PARENT = '00000000-0000-4000-8000-0000000000aa';
const RUN = '00000000-0000-4000-8000-000000000001';
const KID = '00000000-0000-4000-8000-0000000000bb';

function detail(run: Partial<RunView>, events: RunEvent[]): AdminRunDetail {
  const view = {
    id: RUN,
    kind: 'research',
    status: 'waiting',
    input: {},
    output: null,
    state: {},
    cursor: { step: 0, name: null, status: 'pending', attempt: 0, item: null },
    epoch: 1,
    workerId: null,
    leaseExpiresAt: null,
    availableAt: new Date(),
    priority: 0,
    attempts: 0,
    maxAttempts: 5,
    idempotencyKey: null,
    cancelRequestedAt: null,
    cancelReason: null,
    parkedReason: null,
    concurrencyKey: null,
    limitedBy: null,
    parentId: null,
    error: null,
    createdAt: new Date(),
    updatedAt: new Date(),
    finishedAt: null,
    ...run,
  } as RunView;
  const timeline = buildTimeline(events, [], { olderEvents: false, olderCheckpoints: false });
  return { run: view, checkpoints: [], commands: [], events, timeline, limit: 200, token: 't' };
}

describe('the run page', () => {
  it('links a child run to its parent, and a parent to the children it started', () => {
    const started: RunEvent = {
      id: 2,
      runId: RUN,
      type: 'child.started',
      epoch: 1,
      payload: { step: 0, child: KID, kind: 'summarize' },
      createdAt: new Date(),
    };
    const page = renderRunPage('/durable', 'op', detail({ parentId: PARENT }, [started]));
    expect(page).toContain(`data-testid="parent"><a class="mono" href="/durable/runs/${PARENT}">`);
    expect(page).toContain(`href="/durable/runs/${KID}">summarize ${KID.slice(0, 8)}</a>`);
  });

  it('marks a run held on non-determinism with a held badge', () => {
    expect(renderRunPage('/durable', 'op', detail({ held: true }, []))).toContain('data-testid="held"');
    expect(renderRunPage('/durable', 'op', detail({ held: false }, []))).not.toContain('data-testid="held"');
    const summary = {
      ...detail({}, []).run,
      held: true,
      errorMessage: null,
      inDoubtCommands: 0,
      awaitingApproval: 0,
    };
    const stats = {
      byStatus: {},
      heldBack: {},
      dueWithoutWorker: {},
      dueByKind: {},
      schedules: [],
    } as unknown as RunStats;
    const runsPage = (held: boolean) =>
      renderRunsPage('/durable', 'op', {}, { items: [{ ...summary, held }] }, stats);
    expect(runsPage(true)).toContain('data-testid="held"');
    expect(runsPage(false)).not.toContain('data-testid="held"');
  });

  it('shows neither for a run with no family', () => {
    const page = renderRunPage('/durable', 'op', detail({}, []));
    expect(page).not.toContain('data-testid="parent"');
    expect(page).not.toContain('data-testid="children"');
  });
});
