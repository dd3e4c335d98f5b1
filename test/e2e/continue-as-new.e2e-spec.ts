import { INestApplication, Injectable } from '@nestjs/common';
import {
  CommandContext,
  currentRun,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  RunContext,
  RunRepository,
} from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';
import { gate, tickUntilStatus } from '../helpers/drive';

/** Every send the target saw, by idempotency key (a key seen twice would be a repeated effect). */
const sent: string[] = [];
/** Values a step body drew with ctx.uuid(), per generation (a later generation must not repeat them). */
const drawn: string[] = [];
/** Turns whose body waits here, between its last write and its continueAsNew. */
const holds = new Map<number, ReturnType<typeof gate>>();

@Injectable()
class ChatSteps {
  @DurableStep({ kind: 'model' })
  async answer(turn: number) {
    drawn.push(currentRun()!.uuid());
    return turn * 10;
  }

  @IdempotentCommand({ name: 'send', inDoubt: 'retry-with-key' })
  async send(args: { turn: number }, ctx?: CommandContext) {
    sent.push(ctx!.idempotencyKey);
    return { delivered: args.turn };
  }

  @DurableStep()
  async misuse() {
    return currentRun()!.continueAsNew({});
  }
}

@DurableWorkflow('chat-kid')
class ChatKid {
  async run(input: { turn: number }) {
    return input.turn + 100;
  }
}

interface ChatInput {
  turn: number;
  turns: number;
  total: number;
}

@DurableWorkflow('chat')
class Chat {
  constructor(private readonly s: ChatSteps) {}
  async run(input: ChatInput, ctx: RunContext): Promise<{ total: number; turns: number }> {
    const reply = await this.s.answer(input.turn);
    await this.s.send({ turn: input.turn });
    await ctx.emit('turn', { turn: input.turn });
    if (input.turn === 1) await ctx.waitForSignal('go-on');
    const kid = input.turn <= 2 ? await ctx.child(ChatKid, { turn: input.turn }) : 0;
    const total = input.total + reply + kid;
    await holds.get(input.turn)?.promise;
    if (input.turn < input.turns) return ctx.continueAsNew({ ...input, turn: input.turn + 1, total });
    return { total, turns: input.turn + 1 };
  }
}

@DurableWorkflow('bad-continue')
class BadContinue {
  constructor(private readonly s: ChatSteps) {}
  async run(input: { where: 'step' | 'input' }, ctx: RunContext) {
    if (input.where === 'step') return this.s.misuse();
    return ctx.continueAsNew({ when: new Date(), fn: () => 1 });
  }
}

/**
 * Issue 22's done-when: a continued-as-new run keeps its identity for the caller (its result is the
 * last generation's), and each generation starts from a fresh history whose keys never meet an earlier
 * one's.
 */
describe('ctx.continueAsNew', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  let worker: DurableWorker;

  beforeAll(async () => {
    db = await createTestDatabase('continue');
    app = await bootApp(db.url, [ChatSteps, ChatKid, Chat, BadContinue], { worker: { concurrency: 4 } });
    runs = app.get(RunRepository);
    worker = app.get(DurableWorker);
  });
  afterAll(async () => {
    await worker?.idle();
    await app?.close();
    await db?.drop();
  });

  const drive = (id: string, status: string) => tickUntilStatus(app, id, status);

  it('keeps the run id: signals, the stream and result() follow it to the last generation', async () => {
    const started = await runs.start(Chat, { turn: 0, turns: 3, total: 0 });
    const id = started.run.id;
    await waitFor(
      async () => {
        await worker.tick();
        await worker.idle();
        return (await runs.events(id)).some(
          (e) => e.type === 'run.waiting_for_signal' && (e.payload as { name: string }).name === 'go-on',
        );
      },
      15_000,
      'generation 1 to wait for its signal',
    );
    expect((await db.query(`select generation from ai_runs where id = $1`, [id]))[0].generation).toBe(1);
    await runs.signal(id, 'go-on', true);
    await drive(id, 'succeeded');
    // Turns 0 to 3: answers 0+10+20+30, children of turns 0, 1 and 2 (100+101+102).
    expect(await started.result()).toEqual({ total: 60 + 303, turns: 4 });
    expect(await runs.result(id)).toEqual({ total: 363, turns: 4 });

    const [row] = await db.query(`select generation, input from ai_runs where id = $1`, [id]);
    expect(row).toEqual({ generation: 3, input: { turn: 3, turns: 3, total: 333 } });
    const continued = (await runs.events(id)).filter((e) => e.type === 'run.continued_as_new');
    // Deleted with each history: the step, the command, the emit, and the waits (each with its deadline
    // record) and child starts of the turns that had them.
    expect(continued.map((e) => e.payload)).toEqual([
      { generation: 1, checkpoints: 6, commands: 1 },
      { generation: 2, checkpoints: 8, commands: 1 },
      { generation: 3, checkpoints: 6, commands: 1 },
    ]);
    // Only the last generation's history is left: its step, command, emit (no wait, no child).
    expect((await runs.checkpoints(id)).map((c) => c.stepName)).toEqual([
      'ChatSteps.answer',
      'command:send',
      '$emit:turn',
    ]);
    // Each generation sent once, under a key of its own; the first keeps the key format it always had.
    expect(sent).toEqual([
      `run_${id}:step_1:send`,
      `run_${id}:g1:step_1:send`,
      `run_${id}:g2:step_1:send`,
      `run_${id}:g3:step_1:send`,
    ]);
    // Values drawn inside a step differ from one generation to the next.
    expect(new Set(drawn).size).toBe(drawn.length);
    // Children keyed by generation: one per turn that asked for one.
    const kids = await db.query(
      `select idempotency_key from ai_runs where parent_id = $1 order by created_at`,
      [id],
    );
    expect(kids.map((k: { idempotency_key: string }) => k.idempotency_key)).toEqual([
      `child:${id}:3`,
      `child:${id}:g1:5`,
      `child:${id}:g2:3`,
    ]);
    // The stream goes on across generations, one entry per turn, seqs without a gap.
    expect((await runs.stream(id)).map((e) => [e.seq, e.data])).toEqual([
      [1, { turn: 0 }],
      [2, { turn: 1 }],
      [3, { turn: 2 }],
      [4, { turn: 3 }],
    ]);
  });

  it('a stale worker cannot continue the run: its write is fenced out and nothing changes', async () => {
    holds.set(5, gate());
    const id = (await runs.start(Chat, { turn: 5, turns: 9, total: 0 })).run.id;
    // Held between its last write and its continue; then "another claim" takes the run (epoch + 1).
    const ticking = worker.tick();
    await waitFor(
      async () => (await runs.checkpoints(id)).some((c) => c.stepName === '$emit:turn'),
      10_000,
      'the emit before the continue',
    );
    await db.query(`update ai_runs set epoch = epoch + 1, worker_id = 'other' where id = $1`, [id]);
    holds.get(5)!.open();
    await ticking;
    await worker.idle();
    const [row] = await db.query(`select generation, input, status from ai_runs where id = $1`, [id]);
    expect(row).toEqual({ generation: 0, input: { turn: 5, turns: 9, total: 0 }, status: 'running' });
    expect((await runs.events(id)).some((e) => e.type === 'run.continued_as_new')).toBe(false);
  });

  it('refuses continueAsNew inside a step and an input that is not JSON, naming what is wrong', async () => {
    const inStep = (await runs.start('bad-continue', { where: 'step' })).run.id;
    await drive(inStep, 'failed');
    expect((await runs.get(inStep))!.error).toMatchObject({
      message: expect.stringMatching(/ctx.continueAsNew\(\) must be called in the workflow body/),
    });
    const badInput = (await runs.start('bad-continue', { where: 'input' })).run.id;
    await drive(badInput, 'failed');
    expect((await runs.get(badInput))!.error).toMatchObject({
      message: expect.stringMatching(/ctx.continueAsNew\(input\): .*input of ctx.continueAsNew\(\)/),
    });
    expect((await db.query(`select generation from ai_runs where id = $1`, [badInput]))[0].generation).toBe(
      0,
    );
  });
});
