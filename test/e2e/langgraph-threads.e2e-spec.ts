/**
 * LangGraph threads belong to runs, and the saver's limits (issue 46 part 3): a thread is owned by the
 * run that wrote it first; another run that names it (its custom thread, or another run's default
 * `run_<id>`) is refused with ForeignThreadError on read and on write, nothing read or written, unless
 * the code shares it (`runGraph`'s `shareThread`, the saver's `shareThreads`); threads written outside
 * runs are adopted by the first run that writes them, and the migration gives the rows already there
 * their owner. A channel named `__proto__` round-trips as data; a value above the cap is refused with
 * PayloadTooLargeError naming its channel, nothing written.
 */
import { randomUUID } from 'node:crypto';
import { INestApplication, Injectable } from '@nestjs/common';
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import { emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint';
import { Pool } from 'pg';
import type { QueryRunner } from 'typeorm';
import { LangGraphThreadOwners1766990000000 } from '../../migrations';
import {
  DURABLE_HTTP_STATUS,
  DurableStep,
  DurableWorkflow,
  PayloadTooLargeError,
  RunContext,
  RunRepository,
} from '../../src';
import { ForeignThreadError } from '../../src/langgraph';
import { DurablePostgresSaver, runGraph } from '../../src/langgraph';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';

const Turns = Annotation.Root({
  who: Annotation<string>(),
  log: Annotation<string[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }),
});

let pool: Pool;
let saver: DurablePostgresSaver;
/** A saver that shares the threads named `shared-…` with every run. */
let sharingSaver: DurablePostgresSaver;

function turnsGraph(s: DurablePostgresSaver, pad = 0) {
  return new StateGraph(Turns)
    .addNode('turn', (st: typeof Turns.State) => ({ log: [st.who + 'x'.repeat(pad)] }))
    .addEdge(START, 'turn')
    .addEdge('turn', END)
    .compile({ checkpointer: s });
}

/** What a refused call answers as a run's output (the run itself succeeds: the test reads it). */
function refusal(err: unknown) {
  if (err instanceof ForeignThreadError)
    return { refused: err.code, access: err.access, thread: err.threadId, run: err.runId };
  if (err instanceof PayloadTooLargeError) return { refused: err.code, message: err.message };
  throw err;
}

interface TurnInput {
  who: string;
  threadId?: string;
  share?: boolean;
  pad?: number;
}

/** One turn of a conversation graph on `threadId` (default: the run's thread). */
@DurableWorkflow('lg-turn')
class TurnWorkflow {
  async run(input: TurnInput, ctx: RunContext) {
    try {
      const state = await runGraph(
        ctx,
        turnsGraph(saver, input.pad),
        { who: input.who },
        { threadId: input.threadId, shareThread: input.share },
      );
      return { log: state.log };
    } catch (err) {
      return refusal(err);
    }
  }
}

interface ProbeInput {
  threadId: string;
  op: 'getTuple' | 'list' | 'journal' | 'put' | 'putWrites' | 'deleteThread';
  sharing?: boolean;
}

/**
 * One call of the saver from inside a run (its fence and owner: the run's), on any thread: in a step, so
 * that the replay check reads its outcome from the record instead of writing again.
 */
@Injectable()
class ProbeSteps {
  @DurableStep()
  async probe({ threadId, op, sharing }: ProbeInput) {
    const s = sharing ? sharingSaver : saver;
    const config = { configurable: { thread_id: threadId, checkpoint_ns: '' } };
    try {
      if (op === 'getTuple') return { values: (await s.getTuple(config))?.checkpoint.channel_values ?? null };
      if (op === 'list') {
        const seen: string[] = [];
        for await (const t of s.list(config)) seen.push(t.checkpoint.id);
        return { listed: seen.length };
      }
      if (op === 'journal') return { journal: await s.journal(threadId) };
      if (op === 'put') {
        const cp = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { who: 'intruder' } };
        await s.put(config, cp, { source: 'update', step: 99, parents: {} }, { who: 99 });
      } else if (op === 'putWrites') {
        const [last] = await listIds(threadId);
        await s.putWrites(
          { configurable: { ...config.configurable, checkpoint_id: last } },
          [['who', 'intruder']],
          'probe-task',
        );
      } else await s.deleteThread(threadId);
      return { written: true };
    } catch (err) {
      return refusal(err);
    }
  }
}

@DurableWorkflow('lg-probe')
class ProbeWorkflow {
  constructor(private readonly steps: ProbeSteps) {}
  async run(input: ProbeInput) {
    return this.steps.probe(input);
  }
}

const listIds = async (threadId: string): Promise<string[]> =>
  (
    await pool.query<{ id: string }>(
      `select checkpoint_id as id from langgraph_checkpoints where thread_id = $1 order by checkpoint_id desc`,
      [threadId],
    )
  ).rows.map((r) => r.id);

describe('langgraph: threads belong to runs; the saver caps values and keeps channels as data', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;

  beforeAll(async () => {
    db = await createTestDatabase('lgthreads');
    app = await bootApp(db.url, [TurnWorkflow, ProbeSteps, ProbeWorkflow], { database: { url: db.url } });
    pool = new Pool({ connectionString: db.url, max: 4 });
    // An idle connection the server ends is dropped by the pool; without a listener its 'error' event
    // would fail whichever test runs then (a query on it would still fail its own test).
    pool.on('error', (err) => console.warn(`langgraph-threads: an idle connection ended: ${err.message}`));
    saver = new DurablePostgresSaver({ db: pool });
    sharingSaver = new DurablePostgresSaver({ db: pool, shareThreads: (t) => t.startsWith('shared-') });
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await pool?.end();
    await db?.drop();
  });

  /** Starts a run and drives it to its end: its output (it must succeed). */
  async function run(kind: string, input: unknown): Promise<{ id: string; output: any }> {
    const {
      run: { id },
    } = await runs.start(kind, input);
    const done = await driveUntil(app, db, id);
    expect(done).toMatchObject({ status: 'succeeded' });
    return { id, output: done.output };
  }

  /** Everything stored of a thread, to compare before and after a refused call. */
  const rowsOf = async (threadId: string) => ({
    checkpoints: await db.query(
      `select checkpoint_id, run_id from langgraph_checkpoints where thread_id = $1 order by 1`,
      [threadId],
    ),
    writes: await db.query(
      `select checkpoint_id, task_id, idx, run_id from langgraph_writes where thread_id = $1 order by 1, 2, 3`,
      [threadId],
    ),
    journal: await db.query(`select run_id from langgraph_journal where thread_id = $1 order by 1`, [
      threadId,
    ]),
    owner: await db.query(`select run_id from langgraph_threads where thread_id = $1`, [threadId]),
  });

  it("another run naming a run's thread is refused, on read and on write, with nothing read or written", async () => {
    const conv = `conv-${randomUUID()}`;
    const a = await run('lg-turn', { who: 'A', threadId: conv });
    expect(a.output).toEqual({ log: ['A'] });
    const aDefault = await run('lg-turn', { who: 'A2' }); // on its default thread, run_<id>
    expect(aDefault.output).toEqual({ log: ['A2'] });

    // A graph in another run, on the custom thread and on the other run's default thread: refused at
    // its first read. It never sees A's state (before: its output was A's log).
    for (const threadId of [conv, `run_${aDefault.id}`]) {
      const b = await run('lg-turn', { who: 'B', threadId });
      expect(b.output).toEqual({
        refused: 'DURABLE_FOREIGN_THREAD',
        access: 'read',
        thread: threadId,
        run: b.id,
      });
    }
    expect(await db.query(`select run_id from langgraph_threads where thread_id = $1`, [conv])).toEqual([
      { run_id: a.id },
    ]);
    const before = await rowsOf(conv);
    const beforeDefault = await rowsOf(`run_${aDefault.id}`);
    // Each of the saver's reads and writes, from inside another run.
    for (const threadId of [conv, `run_${aDefault.id}`])
      for (const op of ['getTuple', 'list', 'journal', 'put', 'putWrites', 'deleteThread'] as const) {
        const p = await run('lg-probe', { threadId, op });
        const access = ['put', 'putWrites', 'deleteThread'].includes(op) ? 'write' : 'read';
        expect({ op, ...p.output }).toEqual({
          op,
          refused: 'DURABLE_FOREIGN_THREAD',
          access,
          thread: threadId,
          run: p.id,
        });
      }
    expect(await rowsOf(conv)).toEqual(before);
    expect(await rowsOf(`run_${aDefault.id}`)).toEqual(beforeDefault);

    // The owner run itself reads and writes its thread (a continue-as-new generation keeps the run id).
    const own = new DurablePostgresSaver({
      db: pool,
      fence: () => ({ runId: a.id, epoch: 1 }),
    });
    expect((await own.getTuple({ configurable: { thread_id: conv } }))?.checkpoint.channel_values).toEqual(
      expect.objectContaining({ log: ['A'] }),
    );
    // A typed error with a code, a message that says what to do, and its HTTP status (DurableExceptionFilter).
    const err = new ForeignThreadError(conv, a.id, 'write');
    expect(err.message).toMatch(/another run wrote it first/);
    expect(err.message).toMatch(/shareThread: true/);
    expect(DURABLE_HTTP_STATUS[err.code]).toBe(403);
  });

  it('a thread shared explicitly is read and written by another run: runGraph shareThread, the saver shareThreads', async () => {
    const conv = `conv-${randomUUID()}`;
    const a = await run('lg-turn', { who: 'A', threadId: conv });
    expect(a.output).toEqual({ log: ['A'] });
    // runGraph({ shareThread }): the other run's graph goes on with a new turn on the conversation.
    const c = await run('lg-turn', { who: 'C', threadId: conv, share: true });
    expect(c.output).toEqual({ log: ['A', 'C'] });
    const d = await run('lg-turn', { who: 'D', threadId: conv, share: true });
    expect(d.output).toEqual({ log: ['A', 'C', 'D'] });
    // The first writer keeps the thread; each run wrote its own checkpoints and journal.
    const rows = await rowsOf(conv);
    expect(rows.owner).toEqual([{ run_id: a.id }]);
    expect(new Set(rows.checkpoints.map((r: { run_id: string }) => r.run_id))).toEqual(
      new Set([a.id, c.id, d.id]),
    );
    expect(rows.journal).toEqual([a.id, c.id, d.id].sort().map((run_id) => ({ run_id })));
    // Not shared, still refused.
    expect((await run('lg-turn', { who: 'E', threadId: conv })).output).toMatchObject({
      refused: 'DURABLE_FOREIGN_THREAD',
    });

    // The saver's shareThreads: the threads it names only.
    const shared = `shared-${randomUUID()}`;
    await run('lg-turn', { who: 'A', threadId: shared });
    for (const op of ['getTuple', 'put', 'putWrites'] as const)
      expect((await run('lg-probe', { threadId: shared, op, sharing: true })).output).not.toHaveProperty(
        'refused',
      );
    expect((await run('lg-probe', { threadId: conv, op: 'put', sharing: true })).output).toMatchObject({
      refused: 'DURABLE_FOREIGN_THREAD',
      access: 'write',
    });
    expect((await run('lg-probe', { threadId: shared, op: 'put' })).output).toMatchObject({
      refused: 'DURABLE_FOREIGN_THREAD',
    });
  });

  it('adopts threads no run owns: written outside runs, the first run that writes one owns it', async () => {
    const legacy = `legacy-${randomUUID()}`;
    // Written outside any run (the app's own code, a script): its rows name no run, no owner.
    expect(await turnsGraph(saver).invoke({ who: 'L' }, { configurable: { thread_id: legacy } })).toEqual({
      who: 'L',
      log: ['L'],
    });
    expect(
      await db.query(`select distinct run_id from langgraph_checkpoints where thread_id = $1`, [legacy]),
    ).toEqual([{ run_id: null }]);
    // Any run may read it until one writes it (a read adopts nothing).
    expect((await run('lg-probe', { threadId: legacy, op: 'getTuple' })).output).toMatchObject({
      values: { who: 'L', log: ['L'] },
    });
    // The first run that writes it adopts it: a new turn on what was there.
    const a = await run('lg-turn', { who: 'A', threadId: legacy });
    expect(a.output).toEqual({ log: ['L', 'A'] });
    expect((await run('lg-turn', { who: 'B', threadId: legacy })).output).toMatchObject({
      refused: 'DURABLE_FOREIGN_THREAD',
      access: 'read',
    });
    expect((await rowsOf(legacy)).owner).toEqual([{ run_id: a.id }]);
    // Outside a run the saver checks no owner (as LangGraph's own savers; the validation suite runs there).
    expect((await saver.getTuple({ configurable: { thread_id: legacy } }))?.checkpoint.id).toBeDefined();
  });

  it("the migration gives the rows already there their owner: the run of the thread's earliest checkpoint", async () => {
    const conv = `conv-${randomUUID()}`;
    const a = await run('lg-turn', { who: 'A', threadId: conv });
    const c = await run('lg-turn', { who: 'C', threadId: conv, share: true }); // a later run's rows too
    const outside = `outside-${randomUUID()}`;
    await turnsGraph(saver).invoke({ who: 'O' }, { configurable: { thread_id: outside } });
    // Back to the tables before migration 1766990000000 (no owners, one journal per thread), and up again.
    const migration = new LangGraphThreadOwners1766990000000();
    const q = { query: (sql: string) => pool.query(sql) } as unknown as QueryRunner;
    await migration.down(q);
    expect(await db.query(`select to_regclass('langgraph_threads') as t`)).toEqual([{ t: null }]);
    expect(await db.query(`select run_id from langgraph_journal where thread_id = $1`, [conv])).toEqual([
      { run_id: c.id },
    ]);
    await migration.up(q);
    expect(await db.query(`select run_id from langgraph_threads where thread_id = $1`, [conv])).toEqual([
      { run_id: a.id },
    ]);
    expect(await db.query(`select 1 from langgraph_threads where thread_id = $1`, [outside])).toEqual([]);
    expect((await run('lg-turn', { who: 'B', threadId: conv })).output).toMatchObject({
      refused: 'DURABLE_FOREIGN_THREAD',
    });
    expect((await run('lg-turn', { who: 'A', threadId: outside })).output).toEqual({ log: ['O', 'A'] });
  });

  it('a channel named __proto__ round-trips as data, never as the prototype', async () => {
    const threadId = `proto-${randomUUID()}`;
    const values = JSON.parse('{"__proto__": {"polluted": true}, "plain": 1}') as Record<string, unknown>;
    const versions = JSON.parse('{"__proto__": 1, "plain": 1}') as Record<string, number>;
    const cp = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: values, channel_versions: versions };
    const config = await saver.put(
      { configurable: { thread_id: threadId, checkpoint_ns: '' } },
      cp,
      { source: 'input', step: -1, parents: {} },
      versions,
    );
    const read = (await saver.getTuple({ configurable: { thread_id: threadId } }))!.checkpoint.channel_values;
    expect(Object.keys(read).sort()).toEqual(['__proto__', 'plain']);
    expect(Object.getOwnPropertyDescriptor(read, '__proto__')?.value).toEqual({ polluted: true });
    expect((read as { polluted?: unknown }).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(read)).not.toEqual({ polluted: true });
    // A pending write to it (its index was looked up in LangGraph's special channels by the name).
    await saver.putWrites(config, [['__proto__', { polluted: 'write' }]], 'task-1');
    const tuple = (await saver.getTuple({ configurable: { thread_id: threadId } }))!;
    expect(tuple.pendingWrites).toEqual([['task-1', '__proto__', { polluted: 'write' }]]);
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
  });

  it('a value above the cap is refused with PayloadTooLargeError naming the channel, nothing written', async () => {
    const threadId = `big-${randomUUID()}`;
    const small = new DurablePostgresSaver({ db: pool, maxValueBytes: 4096 });
    const config = { configurable: { thread_id: threadId, checkpoint_ns: '' } };
    const put = (s: DurablePostgresSaver, value: unknown) =>
      s.put(
        config,
        { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { notes: value, ok: 1 } },
        { source: 'input', step: -1, parents: {} },
        { notes: 1, ok: 1 },
      );
    const refused = await put(small, 'x'.repeat(5000)).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(PayloadTooLargeError);
    expect(refused).toMatchObject({ code: 'DURABLE_PAYLOAD_TOO_LARGE', limit: 4096 });
    expect((refused as Error).message).toMatch(/LangGraph channel "notes" \(thread "big-/);
    expect(await rowsOf(threadId)).toEqual({ checkpoints: [], writes: [], journal: [], owner: [] });

    // A pending write, too; and the default cap (2 MiB, the module's limits.maxOutputBytes default).
    const cfg = await put(small, 'fits');
    await expect(small.putWrites(cfg, [['notes', 'y'.repeat(5000)]], 't')).rejects.toThrow(
      /pending write to LangGraph channel "notes"/,
    );
    await expect(put(saver, 'z'.repeat(3 << 20))).rejects.toThrow(PayloadTooLargeError);
    expect((await rowsOf(threadId)).checkpoints).toHaveLength(1);
    expect(await db.query(`select 1 from langgraph_writes where thread_id = $1`, [threadId])).toEqual([]);

    // Inside a run: the graph's write is refused and the run is told why.
    const big = await run('lg-turn', { who: 'A', pad: 3 << 20 });
    expect(big.output).toMatchObject({
      refused: 'DURABLE_PAYLOAD_TOO_LARGE',
      message: expect.stringMatching(/LangGraph channel "log"|pending write to LangGraph channel "log"/),
    });
  });
});
