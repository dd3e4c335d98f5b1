import type { CheckpointView, RunEvent } from '../interfaces/run.interface';
import { buildTimeline } from './run-timeline';

const RUN = '00000000-0000-4000-8000-000000000001';
let id = 0;
const at = (ms: number) => new Date(Date.UTC(2026, 0, 1) + ms);
const ev = (ms: number, epoch: number, type: string, payload: Record<string, unknown> = {}): RunEvent => ({
  id: ++id,
  runId: RUN,
  type,
  epoch,
  payload,
  createdAt: at(ms),
});
const cp = (
  ms: number,
  epoch: number,
  stepIndex: number,
  stepName: string,
  meta: any = null,
): CheckpointView => ({
  runId: RUN,
  stepIndex,
  stepName,
  output: null,
  attempt: 0,
  epoch,
  meta,
  createdAt: at(ms),
});

describe('buildTimeline', () => {
  it('groups by epoch and marks the takeover after a lease expired, with the step cut by the crash', () => {
    const events = [
      ev(0, 0, 'run.created'),
      ev(100, 1, 'run.claimed', { workerId: 'a:1:x' }),
      ev(110, 1, 'model.call_started', { step: 0, name: 'plan' }),
      ev(400, 1, 'run.checkpoint_saved', { step: 0, name: 'plan', kind: 'model' }),
      ev(410, 1, 'step.started', { step: 1, name: 'fetch' }),
      ev(5000, 1, 'run.reconciled', { reason: 'lease_expired', previousWorker: 'a:1:x', inDoubt: [] }),
      ev(5100, 2, 'run.claimed', { workerId: 'b:2:y' }),
      ev(5110, 2, 'step.started', { step: 1, name: 'fetch' }),
      ev(5300, 2, 'run.checkpoint_saved', { step: 1, name: 'fetch', kind: 'tool' }),
      ev(5320, 2, 'run.checkpoint_saved', { step: 2, name: 'sum', kind: 'compute' }),
      ev(5330, 2, 'run.released', { reason: 'drain' }),
      ev(5400, 3, 'run.claimed', { workerId: 'c:3:z' }),
    ];
    const checkpoints = [
      cp(400, 1, 0, 'plan', { usage: { prompt_tokens: 9 } }),
      cp(5300, 2, 1, 'fetch'),
      cp(5320, 2, 2, 'sum'),
    ];
    const t = buildTimeline(events, checkpoints);
    expect(t.epochs.map((s) => [s.epoch, s.start, s.workerId])).toEqual([
      [0, 'created', null],
      [1, 'first-claim', 'a:1:x'],
      [2, 'takeover', 'b:2:y'],
      [3, 'handover', 'c:3:z'],
    ]);
    expect(t.epochs[2].takeover).toMatchObject({ previousWorker: 'a:1:x', detectedAt: at(5000) });
    expect(t.workers).toEqual(['a:1:x', 'b:2:y', 'c:3:z']);
    expect(t.takeovers).toBe(1);
    expect(t.steps.map((s) => [s.name, s.kind, s.epoch, s.durationMs, s.executions])).toEqual([
      ['plan', 'model', 1, 290, 1],
      ['fetch', 'tool', 2, 190, 2], // started in epoch 1, cut by the crash, run again in epoch 2
      ['sum', 'compute', 2, 20, 1], // no start mark: measured from the previous event of its claim
    ]);
    expect(t.steps[0].usage).toEqual({ prompt_tokens: 9 });
  });

  it('shows a started step without a checkpoint as running, or interrupted once a later epoch exists', () => {
    const running = buildTimeline(
      [
        ev(0, 1, 'run.claimed', { workerId: 'a' }),
        ev(5, 1, 'tool.command_reserved', { step: 0, name: 'charge' }),
      ],
      [],
    );
    expect(running.steps).toMatchObject([{ name: 'charge', kind: 'command', state: 'running' }]);
    const cut = buildTimeline(
      [
        ev(0, 1, 'run.claimed', { workerId: 'a' }),
        ev(5, 1, 'step.started', { step: 0, name: 'fetch' }),
        ev(9, 2, 'run.claimed', { workerId: 'b' }),
      ],
      [],
    );
    expect(cut.steps).toMatchObject([{ name: 'fetch', state: 'interrupted', executions: 1 }]);
    expect(cut.epochs[1].start).toBe('resume');
  });

  it('shows a step whose claim ended in a failure as failed; one cut by a drain or a park as interrupted', () => {
    const claimed = ev(0, 1, 'run.claimed', { workerId: 'a' });
    const started = ev(5, 1, 'step.started', { step: 1, name: 'call_vendor' });
    const stateAfter = (type: string) =>
      buildTimeline([claimed, started, ev(9, 1, type, {})], []).steps.map((s) => s.state);
    expect(stateAfter('run.failed')).toEqual(['failed']);
    expect(stateAfter('run.dead_lettered')).toEqual(['failed']);
    expect(stateAfter('run.retry_scheduled')).toEqual(['failed']);
    expect(stateAfter('run.released')).toEqual(['interrupted']);
    expect(stateAfter('command.approval_requested')).toEqual(['interrupted']);
    // A failure the workflow caught is recorded at the step's index: that checkpoint reads failed.
    const caught = buildTimeline([claimed], [cp(9, 1, 1, 'call_vendor', { failed: true })]);
    expect(caught.steps.map((s) => s.state)).toEqual(['failed']);
  });

  it('built from the newest part of the history only, claims nothing about what is not shown', () => {
    // Shown: the end of epoch 3 and epoch 4; checkpoints from step 5 on (steps 0-4 are older).
    const events = [
      ev(100, 3, 'step.started', { step: 4, name: 'old' }), // its checkpoint is older than those shown
      ev(105, 3, 'run.checkpoint_saved', { step: 5, name: 'sum', kind: 'compute' }),
      ev(200, 4, 'run.claimed', { workerId: 'b' }),
      ev(210, 4, 'step.started', { step: 6, name: 'fetch' }),
      ev(300, 4, 'run.checkpoint_saved', { step: 6, name: 'fetch', kind: 'tool' }),
    ];
    const checkpoints = [cp(105, 3, 5, 'sum'), cp(300, 4, 6, 'fetch')];
    const partial = buildTimeline(events, checkpoints, { olderEvents: true, olderCheckpoints: true });
    expect(partial.epochs.map((s) => [s.epoch, s.start])).toEqual([
      [3, 'earlier'],
      [4, 'resume'],
    ]);
    expect(partial.steps.map((s) => [s.index, s.state, s.durationMs])).toEqual([
      [5, 'done', null], // its start would be the oldest event shown: unknown
      [6, 'done', 90],
    ]);
    // The same rows taken as the whole history.
    const whole = buildTimeline(events, checkpoints);
    expect(whole.epochs[0].start).toBe('first-claim');
    expect(whole.steps.map((s) => [s.index, s.state, s.durationMs])).toEqual([
      [4, 'interrupted', null],
      [5, 'done', 5],
      [6, 'done', 90],
    ]);
  });
});
