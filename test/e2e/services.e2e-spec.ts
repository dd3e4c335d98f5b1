import { INestApplication, Injectable } from '@nestjs/common';
import {
  CheckpointService,
  CommandContext,
  CommandGateway,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  InvalidArgumentError,
  LeaseService,
  RunContext,
  RunRepository,
} from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil, gate } from '../helpers/drive';
import { waitFor } from '../helpers/processes';

/**
 * Issue 20, item 1: the card's four services are public, injectable into an app's own providers, and
 * useful from the users' side: runs (RunRepository), what they recorded (CheckpointService), their
 * side effects (CommandGateway) and who holds them (LeaseService, with the release of a dead pod).
 */

let held = gate();
const sent: string[] = [];

@Injectable()
class Triage {
  @DurableStep({ name: 'classify', kind: 'model' })
  async classify(text: string): Promise<{ label: 'bug' | 'question'; score: number }> {
    return { label: text.includes('crash') ? 'bug' : 'question', score: text.length };
  }
  @DurableStep({ name: 'wait_here', kind: 'tool' })
  async waitHere() {
    await held.promise;
    return 'waited';
  }
  @IdempotentCommand({ name: 'page_oncall', inDoubt: 'lookup' })
  async pageOncall(args: { label: string }, ctx?: CommandContext) {
    sent.push(ctx!.idempotencyKey);
    if (args.label === 'slow') await held.promise;
    return { paged: args.label };
  }
  lookupCommand(_name: string, key: string) {
    return Promise.resolve(
      sent.includes(key) ? { found: true as const, result: { paged: 'late' } } : { found: false as const },
    );
  }
}

@DurableWorkflow('triage-services')
class TriageWorkflow {
  constructor(private readonly t: Triage) {}
  async run(input: { texts: string[]; hold?: 'step' | 'command' }, _ctx: RunContext) {
    const labels = [];
    for (const text of input.texts) labels.push((await this.t.classify(text)).label);
    if (input.hold === 'step') await this.t.waitHere();
    if (input.hold === 'command') await this.t.pageOncall({ label: 'slow' });
    else await this.t.pageOncall({ label: labels[0] });
    return labels;
  }
}

/** A user's own provider: the four services injected by type, as an app writes it. */
@Injectable()
class Operations {
  constructor(
    readonly runs: RunRepository,
    readonly checkpoints: CheckpointService,
    readonly commands: CommandGateway,
    readonly leases: LeaseService,
  ) {}
}

describe('the four services of the card, injected into an app provider', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let ops: Operations;

  beforeAll(async () => {
    db = await createTestDatabase('services');
    app = await bootApp(db.url, [Triage, TriageWorkflow, Operations], { worker: { workerId: 'pod-a' } });
    ops = app.get(Operations);
  });
  afterAll(async () => {
    held.open();
    await app?.close();
    await db?.drop();
  });

  it('CheckpointService reads what a run recorded, typed by the step method', async () => {
    const { run } = await ops.runs.start(TriageWorkflow, { texts: ['it crashes', 'how do I?'] });
    await driveUntil(app, db, run.id);
    const labels = await ops.checkpoints.outputsOf(run.id, Triage.prototype.classify);
    // Typed: `labels` is Array<{ label: 'bug' | 'question'; score: number }>.
    const firstLabel: 'bug' | 'question' = labels[0].label;
    expect(firstLabel).toBe('bug');
    expect(labels).toEqual([
      { label: 'bug', score: 10 },
      { label: 'question', score: 9 },
    ]);
    expect(await ops.checkpoints.lastOutputOf(run.id, 'classify')).toEqual({ label: 'question', score: 9 });
    expect(await ops.checkpoints.outputsOf(run.id, Triage.prototype.pageOncall)).toEqual([{ paged: 'bug' }]);
    // The user's steps; the engine's entries (a command's outcome here) on request.
    expect((await ops.checkpoints.list(run.id)).map((c) => c.stepName)).toEqual(['classify', 'classify']);
    const all = await ops.checkpoints.list(run.id, { includeEngine: true });
    expect(all.map((c) => c.stepName)).toEqual(['classify', 'classify', 'command:page_oncall']);
    expect((await ops.checkpoints.at(run.id, 1))?.output).toEqual({ label: 'question', score: 9 });
    expect(await ops.checkpoints.at(run.id, 7)).toBeNull();
    expect(await ops.commands.listForRun(run.id)).toEqual([
      expect.objectContaining({ status: 'succeeded', result: { paged: 'bug' } }),
    ]);
    await expect(ops.checkpoints.outputsOf(run.id, (() => 1) as () => number)).rejects.toThrow(
      InvalidArgumentError,
    );
    await expect(ops.checkpoints.list('not-a-run')).rejects.toThrow(/runId must be a UUID/);
  });

  it('LeaseService says who holds a run, and releases the runs of a pod reported gone (fenced)', async () => {
    held = gate();
    const worker = app.get(DurableWorker);
    const quiet = await ops.runs.start(TriageWorkflow, { texts: ['a'], hold: 'step' });
    const calling = await ops.runs.start(TriageWorkflow, { texts: ['b'], hold: 'command' });
    await worker.tick();
    await waitFor(async () => (await ops.leases.heldBy('pod-a')).length === 2, 5000, 'both runs held');
    await waitFor(
      async () => (await ops.commands.listForRun(calling.run.id)).some((c) => c.status === 'pending'),
      5000,
      'the slow command to be reserved',
    );
    const holder = (await ops.leases.holder(quiet.run.id))!;
    expect(holder).toMatchObject({
      runId: quiet.run.id,
      kind: 'triage-services',
      workerId: 'pod-a',
      epoch: 1,
      timeline: expect.any(Number), // with the epoch, the claim's fencing token
    });
    expect(holder.leaseExpiresAt.getTime()).toBeGreaterThan(Date.now() - 60_000);
    expect(await ops.leases.holder('00000000-0000-4000-8000-000000000000')).toBeNull();

    // This process's own worker is alive: refused. An orchestrator reports another pod gone.
    await expect(ops.leases.releaseWorker(worker.id)).rejects.toThrow(/is the worker of this process/);
    await expect(ops.leases.releaseWorker('')).rejects.toThrow(InvalidArgumentError);
    // Pretend the runs belong to a pod that died: the test's worker is "pod-a" itself, so move them.
    await db.query(`update ai_runs set worker_id = 'pod-gone' where worker_id = 'pod-a'`);
    const leaseEnd = (await ops.leases.holder(calling.run.id))!.leaseExpiresAt;
    const released = await ops.leases.releaseWorker('pod-gone');
    const byId = new Map(released.map((r) => [r.runId, r]));
    // Nothing in flight for the quiet run? Its tool step was marked started: it may still be calling.
    expect(byId.get(calling.run.id)).toMatchObject({ status: 'waiting', callInFlight: true });
    expect(byId.get(calling.run.id)!.inDoubt).toEqual([`run_${calling.run.id}:step_1:page_oncall`]);
    expect(byId.get(calling.run.id)!.availableAt.getTime()).toBe(leaseEnd.getTime());
    expect(byId.get(quiet.run.id)).toMatchObject({ status: 'waiting', callInFlight: true, inDoubt: [] });
    expect(await ops.leases.heldBy('pod-gone')).toEqual([]);
    const [ev] = await db.query(
      `select payload from ai_events where run_id = $1 and event_type = 'run.reconciled'`,
      [calling.run.id],
    );
    expect(ev.payload).toMatchObject({
      reason: 'worker_gone',
      previousWorker: 'pod-gone',
      outcome: 'waiting',
    });
    // The "dead" pod (our worker) comes back to life: everything it writes now is refused.
    held.open();
    await worker.idle();
    const afterwards = await db.query(
      `select id, status from ai_runs where id = any($1::uuid[]) order by id`,
      [[quiet.run.id, calling.run.id]],
    );
    expect(afterwards.map((r: { status: string }) => r.status)).toEqual(['waiting', 'waiting']);
    expect((await ops.commands.listForRun(calling.run.id))[0].status).toBe('in_doubt');
    // Resumed from its lease end: the lookup finds the page the gone pod sent; nothing is sent twice.
    await db.query(`update ai_runs set available_at = now() where id = $1`, [calling.run.id]);
    expect((await driveUntil(app, db, calling.run.id)).status).toBe('succeeded');
    expect(sent.filter((k) => k === `run_${calling.run.id}:step_1:page_oncall`)).toHaveLength(1);
  });

  it('a run with nothing in flight is due at once', async () => {
    const { run } = await ops.runs.start(TriageWorkflow, { texts: ['c'] });
    // A claim by a pod that dies before it does anything.
    await db.query(
      `update ai_runs set status = 'running', worker_id = 'pod-x', epoch = 1, attempts = 1,
              lease_expires_at = now() + interval '1 minute' where id = $1`,
      [run.id],
    );
    const [r] = await ops.leases.releaseWorker('pod-x');
    expect(r).toMatchObject({ runId: run.id, status: 'waiting', callInFlight: false, inDoubt: [] });
    expect(r.availableAt.getTime()).toBeLessThan(Date.now() + 1000);
    expect((await driveUntil(app, db, run.id)).status).toBe('succeeded');
  });
});
