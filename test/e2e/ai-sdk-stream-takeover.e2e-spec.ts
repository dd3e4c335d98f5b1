/**
 * docs/AI-SDK.md, "Streams across a takeover", with real processes: a `streamText` agent (the model
 * streams slowly from the loopback OpenAI-compatible server) is followed by SSE clients of the run's
 * progress stream (served by this process, which runs no worker). Its worker process is SIGKILLed in
 * the middle of turn 2's stream, after turn 1 committed; another worker process takes over. The client
 * connected across the takeover and the client that dropped and reconnected with Last-Event-ID (as a
 * browser's EventSource does) each see every entry once: turn 1's deltas once, the cut-off attempt of
 * turn 2, then turn 2 streamed again in full (a read after the end marks the cut-off attempt
 * superseded), and the answer is an uninterrupted run's. The turns are charged to the `ai` budget:
 * each committed turn once, its real usage.
 */
import path from 'node:path';
import { Controller, Headers, INestApplication, Param, Sse } from '@nestjs/common';
import { streamText } from 'ai';
import { runEventStream, RunRepository } from '../../src';
import { runDurableMigrations } from '../../src/migrations';
import { bootHttpApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { spawnWorker, waitFor, WorkerProcess } from '../helpers/processes';
import { NARRATION, ScriptedServer, startScriptedServer } from '../helpers/scripted-openai';
import { readSse, Sent } from '../helpers/sse';
import { agentCall, agentEnv, chatModel, supportTools } from '../fixtures/ai-agent-app';

const FIXTURE = path.join(__dirname, '..', 'fixtures', 'ai-agent-app.ts');
const ANSWER = 'Refunded 1250 cents for order A-1 (refund rf_1).';

@Controller('runs')
class StreamController {
  constructor(private readonly runs: RunRepository) {}
  @Sse(':id/stream')
  stream(@Param('id') id: string, @Headers('last-event-id') last?: string) {
    return runEventStream(this.runs, id, { lastEventId: last, pollMs: 250 });
  }
}

type Delta = { kind: 'text' | 'reasoning'; text: string };
type Entry = {
  seq: number;
  topic: string;
  step: number | null;
  epoch: number;
  superseded: boolean;
  data: Delta;
};

describe('ai-sdk: streamText followed over SSE through a worker SIGKILL and a takeover', () => {
  let db: TestDatabase;
  let server: ScriptedServer;
  let api: { app: INestApplication; http: string };
  const workers: WorkerProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('aisdkstream');
    await runDurableMigrations({ type: 'postgres', url: db.url });
    server = await startScriptedServer();
    agentEnv.url = server.url;
    api = await bootHttpApp(db.url, { controllers: [StreamController] });
  });
  afterAll(async () => {
    for (const w of workers) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.exited));
    // An SSE client left open by a failed assertion must not hold the close up.
    await Promise.race([api?.app.close(), new Promise((r) => setTimeout(r, 3000))]);
    server?.close().catch(() => undefined);
    await db?.drop();
  });

  const worker = () => {
    const w = spawnWorker(
      { DB_URL: db.url, AI_URL: server.url, LEASE_TTL_MS: '1500', HEARTBEAT_MS: '400' },
      FIXTURE,
    );
    workers.push(w);
    return w;
  };
  const deltas = async (id: string) =>
    db.query<{ seq: number; step: number; epoch: number }>(
      `select seq, step_index as step, epoch from ai_run_stream where run_id = $1 and topic = 'ai.delta' order by seq`,
      [id],
    );
  const textOf = (entries: Entry[]) =>
    entries
      .filter((e) => e.data.kind === 'text')
      .map((e) => e.data.text)
      .join('');

  it('each committed turn is streamed once, the cut-off turn again in full, and the answer is plain’s', async () => {
    // The uninterrupted run: plain streamText against the same script.
    server.narrate = true;
    const plain = streamText(agentCall(chatModel(), supportTools()));
    const plainSteps = (await plain.steps).map((s) => s.text);
    expect(plainSteps).toEqual([NARRATION[1], NARRATION[2], ANSWER]);
    expect(await plain.text).toBe(ANSWER);
    server.reset();
    server.narrate = true;
    server.streamDelayMs = 150;

    const first = worker();
    await first.ready;
    const [{ id }] = await db.query<{ id: string }>(
      `insert into ai_runs (kind, input) values ('ai-support-stream-budgeted', '{"orderId": "A-1"}') returning id`,
    );
    const url = `${api.http}/runs/${id}/stream`;
    // Client 1 stays connected from the first entry to the end event, across the takeover.
    const live = readSse(url);
    // Client 2 drops after 3 entries (turn 1's deltas), and reconnects with Last-Event-ID later.
    const dropped = await readSse(url, undefined, 3);

    // Turn 2 is streaming: some of its deltas are in the run's stream, the turn has not committed.
    let turn1Step = -1;
    await waitFor(
      async () => {
        const rows = await deltas(id);
        turn1Step = rows[0]?.step ?? -1;
        return rows.filter((r) => r.step !== null && r.step > turn1Step).length >= 2;
      },
      30_000,
      'turn 2 to stream',
    );
    first.child.kill('SIGKILL');
    expect((await first.exited).signal).toBe('SIGKILL');
    expect(server.modelRequests.map((r) => r.turn)).toEqual([1, 2]);

    // Client 2 reconnects as an EventSource would, while no worker drives the run; then a worker takes over.
    const resumed = readSse(url, dropped[dropped.length - 1].id);
    const heir = worker();
    await heir.ready;
    await waitFor(
      async () =>
        (await db.query(`select status from ai_runs where id = $1`, [id]))[0].status === 'succeeded',
      45_000,
      'the run to succeed on the second worker',
    );
    const [run] = await db.query(`select output from ai_runs where id = $1`, [id]);

    // The answer and each turn's text are the uninterrupted run's.
    expect(run.output.text).toBe(await plain.text);
    expect(run.output.stepTexts).toEqual(plainSteps);
    // Turn 1 was never asked again; turn 2, cut off, was; no refund went out before the kill.
    expect(server.modelRequests.map((r) => r.turn)).toEqual([1, 2, 2, 3]);
    expect([...server.refunds.values()].map((r) => r.refundId)).toEqual(['rf_1']);

    // Both clients: every entry once, in order, then the end event.
    const stored = (
      await db.query<{ seq: number }>(`select seq from ai_run_stream where run_id = $1 order by seq`, [id])
    ).map((r) => Number(r.seq));
    const entries = (sent: Sent[]) => sent.filter((m) => m.event !== 'end');
    const followed = await live;
    const reconnected = [...dropped, ...(await resumed)];
    for (const sent of [followed, reconnected]) {
      expect(entries(sent).map((m) => Number(m.id))).toEqual(stored);
      expect(sent[sent.length - 1]).toMatchObject({ event: 'end', data: { runId: id, status: 'succeeded' } });
    }

    // What the live client saw, step by step (as written: turn 2's cut-off attempt, then its new one).
    const seen = entries(followed).map((m) => m.data as Entry);
    const steps = [...new Set(seen.map((e) => e.step))];
    expect(steps).toHaveLength(3);
    const [turn1, turn2, turn3] = steps.map((s) => seen.filter((e) => e.step === s));
    expect(textOf(turn1)).toBe(NARRATION[1]); // once
    expect(turn1.every((e) => e.epoch === 1)).toBe(true);
    const cutOff = turn2.filter((e) => e.epoch === 1);
    const again = turn2.filter((e) => e.epoch === 2);
    expect(cutOff.length).toBeGreaterThanOrEqual(2);
    expect(NARRATION[2].startsWith(textOf(cutOff))).toBe(true);
    expect(textOf(cutOff).length).toBeLessThan(NARRATION[2].length);
    expect(again[0].seq).toBeGreaterThan(cutOff[cutOff.length - 1].seq);
    expect(textOf(again)).toBe(NARRATION[2]); // in full
    expect(textOf(turn3)).toBe(ANSWER);
    expect(turn3.every((e) => e.epoch === 2)).toBe(true);

    // A client that reads the stream after the end: exactly the cut-off attempt reads superseded, and
    // the rest is what the uninterrupted run said.
    const after = entries(await readSse(url)).map((m) => m.data as Entry);
    const cutSeqs = cutOff.map((e) => e.seq);
    expect(after.filter((e) => e.superseded).map((e) => e.seq)).toEqual(cutSeqs);
    expect(textOf(after.filter((e) => !e.superseded && e.topic === 'ai.delta'))).toBe(plainSteps.join(''));

    // The `ai` budget: each committed turn charged once, its totalTokens; the cut-off attempt keeps
    // its estimate (50); nothing for turn 1 after the takeover.
    const uses = await db.query<{ step: number; tokens: string }>(
      `select step, tokens from ai_budget_use where run_id = $1 and budget = 'ai' order by id`,
      [id],
    );
    const [s1, s2, s3] = steps as number[];
    expect(uses.map((u) => [u.step, Number(u.tokens)])).toEqual([
      [s1, 110],
      [s2, 50],
      [s2, 220],
      [s3, 330],
    ]);
    expect(run.output.stepTokens).toEqual([110, 220, 330]);
    expect(run.output.usage.totalTokens).toBe(660);
  }, 120_000);
});
