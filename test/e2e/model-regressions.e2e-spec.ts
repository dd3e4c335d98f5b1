import { INestApplication, Injectable } from '@nestjs/common';
import { Client } from 'pg';
import {
  CommandContext,
  CommandGateway,
  currentRun,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  RunContext,
  RunRepository,
} from '../../src';
import { DurableDatabase } from '../../src/store/durable-database';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil, driveUntilHeld, gate } from '../helpers/drive';

/**
 * Deterministic regressions of the defects the randomized model test (test/model) found after the
 * hand-written edges were fixed: an operator decision filed under the epoch before a claim that
 * committed meanwhile (seed 1005), a recorded value reaching an external call through a sibling
 * branch while the one write carrying it was frozen (seed 1007), and the run context inside a
 * command's own code. Also a replay gap found by review: another command at the step of a reserved one.
 */

/** What each call of `send` saw: its arguments, and whether its run's `$uuid` was durable then. */
const sent: Array<{ to: string; uuidDurable: string | null; runId: string | undefined }> = [];
let db: TestDatabase;
let diverged = false;
let thoughts = 0;
let paid = 0;

@Injectable()
class Vendor {
  @IdempotentCommand({ name: 'send', inDoubt: 'retry-with-key' })
  async send(args: { to: string }, ctx?: CommandContext) {
    const [row] = await db.query(
      `select output #>> '{}' as v from ai_checkpoints where run_id = $1 and step_name = '$uuid'`,
      [ctx!.fence.runId],
    );
    sent.push({ to: args.to, uuidDurable: row?.v ?? null, runId: currentRun()?.runId });
    return { ok: true };
  }
  @IdempotentCommand({ name: 'pay', inDoubt: 'lookup', requiresApproval: true })
  async pay(args: { amount: number; toolCallId?: string }) {
    paid++;
    return { paid: args.amount };
  }
  async lookupCommand() {
    return { found: false as const };
  }
}

@Injectable()
class Model {
  @DurableStep({ name: 'think', kind: 'model' })
  async think(prompt: string) {
    thoughts++;
    return { answer: prompt.length };
  }
}

@DurableWorkflow('regress')
class RegressWorkflow {
  constructor(
    private readonly vendor: Vendor,
    private readonly model: Model,
  ) {}
  async run(input: { shape: string }, ctx: RunContext) {
    if (input.shape === 'approval') return this.vendor.pay({ amount: 3 });
    // Another command at the same step once `diverged` is set (a code change between two claims).
    if (input.shape === 'diverge')
      return diverged ? this.vendor.send({ to: 'x' }) : this.vendor.pay({ amount: 4 });
    if (input.shape === 'diverge-step')
      return diverged ? this.model.think('x') : this.vendor.pay({ amount: 5 });
    if (input.shape === 'diverge-tool')
      return this.vendor.pay({ amount: 6, toolCallId: diverged ? 'call_2' : 'call_1' });
    // Fan-out right after a recorded value: both branches' first writes may carry it.
    const id = ctx.uuid();
    const [thought] = await Promise.all([this.model.think(`about ${id}`), this.vendor.send({ to: id })]);
    return { id, thought };
  }
}

let app: INestApplication;

beforeAll(async () => {
  db = await createTestDatabase('regress');
  app = await bootApp(db.url, [Vendor, Model, RegressWorkflow], { worker: { workerId: 'worker-r' } });
});
afterAll(async () => {
  await app?.close();
  await db?.drop();
});

it('an operator decision racing a claim is filed under the epoch of the claim it waited for (model seed 1005)', async () => {
  const runs = app.get(RunRepository);
  const { run } = await runs.start('regress', { shape: 'approval' });
  await driveUntil(app, db, run.id, ['waiting']); // parked for approval
  const [cmd] = await app.get(CommandGateway).listForRun(run.id);
  // A claim of another worker, holding the run row until it commits.
  const claim = new Client({ connectionString: db.url });
  await claim.connect();
  try {
    await claim.query('begin');
    const { rows } = await claim.query(
      `update ai_runs set status = 'running', worker_id = 'other', epoch = epoch + 1,
              lease_expires_at = now() + interval '1 minute' where id = $1 returning epoch`,
      [run.id],
    );
    const claimedEpoch = Number(rows[0].epoch);
    const approving = runs.approve(run.id, cmd.idempotencyKey, { by: 'oncall' });
    await new Promise((r) => setTimeout(r, 300)); // the decision is now waiting for the run row
    await claim.query('commit');
    await approving;
    const events = await db.query<{ event_type: string; epoch: string }>(
      `select event_type, epoch from ai_events where run_id = $1 order by id`,
      [run.id],
    );
    const decision = events.find((e) => e.event_type === 'command.approved')!;
    expect(Number(decision.epoch)).toBe(claimedEpoch);
    // The trail never goes back in epoch.
    const epochs = events.map((e) => Number(e.epoch));
    expect(epochs).toEqual([...epochs].sort((x, y) => x - y));
  } finally {
    await claim.end();
  }
});

it('a recorded value is durable before a sibling branch sends it out while the write carrying it is in flight (model seed 1007)', async () => {
  sent.length = 0;
  const held = gate();
  const reached = gate();
  // The model step's `started` mark, the first write that carries ctx.uuid(), is held in the client
  // after it took the pending values and before it reaches PostgreSQL (a stalled socket, a GC pause).
  const database = app.get(DurableDatabase);
  const query = database.query.bind(database);
  let armed = true;
  const spy = jest.spyOn(database, 'query').mockImplementation(async (text, values, name) => {
    if (armed && name === 'dx_step_mark' && values?.[7] === 'model.call_started') {
      armed = false;
      reached.open();
      await held.promise;
    }
    return query(text, values, name);
  });
  try {
    const { run } = await app.get(RunRepository).start('regress', { shape: 'fan' });
    const driving = driveUntil(app, db, run.id);
    await reached.promise;
    // Meanwhile the sibling branch reserved and sent its command.
    for (let i = 0; i < 100 && !sent.length; i++) await new Promise((r) => setTimeout(r, 20));
    expect(sent).toHaveLength(1);
    held.open();
    const view = await driving;
    expect(view.status).toBe('succeeded');
    expect(sent).toHaveLength(1);
    // The value the call carried was already in the record when it left the process.
    expect(sent[0].uuidDurable).toBe(sent[0].to);
    expect((view.output as { id: string }).id).toBe(sent[0].to);
  } finally {
    held.open();
    spy.mockRestore();
  }
});

it('currentRun() inside a command method is the run that called it', async () => {
  sent.length = 0;
  const { run } = await app.get(RunRepository).start('regress', { shape: 'fan' });
  expect((await driveUntil(app, db, run.id)).status).toBe('succeeded');
  expect(sent).toEqual([expect.objectContaining({ runId: run.id })]);
});

it.each([
  ['another command', 'diverge'],
  ['a step', 'diverge-step'],
  ['the same command for another tool call', 'diverge-tool'],
])(
  'a replay that calls %s where a command was reserved (not yet recorded) fails before any call',
  async (_, shape) => {
    sent.length = 0;
    thoughts = 0;
    paid = 0;
    const runs = app.get(RunRepository);
    const { run } = await runs.start('regress', { shape });
    await driveUntil(app, db, run.id, ['waiting']); // `pay` reserved at step 0, awaiting approval
    const [pay] = await app.get(CommandGateway).listForRun(run.id);
    expect(pay).toMatchObject({ name: 'pay', status: 'awaiting_approval' });
    diverged = true;
    try {
      await runs.approve(run.id, pay.idempotencyKey, { by: 'ops' });
      const view = await driveUntilHeld(app, db, run.id);
      // The approved `pay` may not be forgotten for a `send` under another key: the run is held instead.
      expect(view.status).toBe('waiting');
      expect(view.error).toMatchObject({ code: 'DURABLE_NON_DETERMINISM' });
      expect((view.error as { message: string }).message).toMatch(/step #0 (as )?"command:pay"/);
      expect(sent).toEqual([]);
      expect(thoughts).toBe(0);
      expect(paid).toBe(0);
      const commands = await app.get(CommandGateway).listForRun(run.id);
      expect(commands.map((c) => c.name)).toEqual(['pay']);
    } finally {
      diverged = false;
    }
  },
);
