/**
 * docs/AI-SDK.md, "an engine error never reaches the model" and "what leaves under a lease", for the
 * AI SDK's tool loop:
 * - the engine stops the run inside a tool call (a cancel, a lost lease): the SDK catches the tool's
 *   error as it catches any, but the next model call throws the engine's error before anything is
 *   sent; the server receives no further request, and the run ends as the engine decided;
 * - a model request leaves only under a live lease: a worker frozen inside the model call (its event
 *   loop blocked past the lease, then the provider's fetch goes on) sends nothing; the provider's own
 *   fetch (global fetch) passes the fenced transport's check on the worker's monotonic clock.
 */
import { INestApplication } from '@nestjs/common';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, tool } from 'ai';
import { currentRun, DurableWorkflow, RunContext, RunRepository } from '../../src';
import { durableModel, durableTools } from '../../src/ai-sdk';
import { DurableWorker } from '../../src/engine/worker.service';
import { Reconciler } from '../../src/maintenance/reconciler.service';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil, gate } from '../helpers/drive';
import { ScriptedServer, startScriptedServer } from '../helpers/scripted-openai';
import { agentCall, agentEnv, chatModel, supportTools } from '../fixtures/ai-agent-app';

const ANSWER = 'Refunded 1250 cents for order A-1 (refund rf_1).';
const LEASE_MS = 2000;

/** The order lookup of the next run holds until the run is stopped; then it throws (as a fetch given the signal) or returns. */
let holdLookup = false;
let lookupEntered = gate();

@DurableWorkflow('ai-stop-in-tool', { maxAttempts: 5 })
class StopInToolWorkflow {
  async run(input: { then: 'throw' | 'return' }, ctx: RunContext) {
    const tools = {
      ...supportTools(),
      lookup_order: tool({
        ...supportTools().lookup_order,
        execute: async ({ orderId }: { orderId: string }) => {
          if (holdLookup) {
            holdLookup = false;
            const signal = (currentRun() ?? ctx).signal;
            lookupEntered.open();
            await new Promise((r) => (signal.aborted ? r(null) : signal.addEventListener('abort', r)));
            if (input.then === 'throw') throw signal.reason;
          }
          return { orderId, amountCents: 1250, status: 'delivered' };
        },
      }),
    };
    const result = await generateText(
      agentCall(durableModel(ctx, chatModel()), durableTools(ctx, tools, { commands: ['refund'] })),
    );
    return { text: result.text };
  }
}

/**
 * The next model request's fetch freezes this process (its event loop blocked) past the lease first.
 * `dropSignal`: the fetch also drops the abort signal the provider passes (a client that takes none):
 * then only the fenced transport's check at the socket stands between the frozen worker and the wire.
 */
let freezeNext = false;
let dropSignal = false;
const fetches: string[] = [];
const freezingFetch: typeof fetch = (url, init) => {
  if (freezeNext) {
    freezeNext = false;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, LEASE_MS + 600);
  }
  return globalThis.fetch(url, dropSignal ? { ...init, signal: undefined } : init).then(
    (r) => (fetches.push('sent'), r),
    (e: Error) => (
      fetches.push(`refused: ${e.name}: ${String((e.cause as Error)?.message ?? e.message)}`),
      Promise.reject(e)
    ),
  );
};

@DurableWorkflow('ai-frozen-model-call', { maxAttempts: 5 })
class FrozenModelCallWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    const provider = createOpenAICompatible({
      name: 'scripted',
      baseURL: `${agentEnv.url}/v1`,
      apiKey: 'test',
      includeUsage: true,
      fetch: freezingFetch, // the app's own fetch, on global fetch: what the fenced transport checks
    });
    const result = await generateText(
      agentCall(
        durableModel(ctx, provider('scripted-1')),
        durableTools(ctx, supportTools(), { commands: ['refund'] }),
      ),
    );
    return { text: result.text };
  }
}

describe('ai-sdk: the engine stops a run inside its tool loop', () => {
  let db: TestDatabase;
  let server: ScriptedServer;
  let app: INestApplication;
  let runs: RunRepository;
  let worker: DurableWorker;

  beforeAll(async () => {
    db = await createTestDatabase('aisdkstops');
    server = await startScriptedServer();
    agentEnv.url = server.url;
    app = await bootApp(db.url, [StopInToolWorkflow, FrozenModelCallWorkflow], {
      worker: { leaseTtlMs: LEASE_MS, heartbeatMs: 500 },
    });
    runs = app.get(RunRepository);
    worker = app.get(DurableWorker);
  });
  afterAll(async () => {
    await app?.close();
    await server?.close();
    await db?.drop();
  });
  beforeEach(() => {
    server.reset();
    holdLookup = false;
    lookupEntered = gate();
  });

  const modelCallsStarted = async (id: string) =>
    (
      await db.query<{ n: number }>(
        `select count(*)::int as n from ai_events where run_id = $1 and event_type = 'model.call_started'`,
        [id],
      )
    )[0].n;
  /** One claim of the run, driven until this worker has let go of it. */
  const oneClaim = async () => {
    await worker.tick();
    await worker.idle();
  };
  /** The lease the stopped claim left runs out; the reconciler hands the run back to the queue. */
  const requeue = async (id: string) => {
    await db.query(`update ai_runs set lease_expires_at = now() - interval '1 second' where id = $1`, [id]);
    await app.get(Reconciler).sweep();
  };

  for (const then of ['throw', 'return'] as const) {
    it(`a cancel during a tool's execute (the tool then ${then}s): no further model request, the run ends cancelled`, async () => {
      holdLookup = true;
      const { run } = await runs.start(StopInToolWorkflow, { then });
      const driving = driveUntil(app, db, run.id);
      await lookupEntered.promise;
      await runs.cancel(run.id, 'the customer withdrew');
      await worker.heartbeat(); // the worker sees the cancel: the run's signal aborts inside the tool
      const done = await driving;
      expect(done.status).toBe('cancelled');
      expect(done.output).toBeNull();
      expect(server.modelRequests.map((r) => r.turn)).toEqual([1]);
      expect(await modelCallsStarted(run.id)).toBe(1);
      expect(server.refunds.size).toBe(0);
    });
  }

  it("a lease lost during a tool's execute: the stale claim sends no model request; the next claim finishes", async () => {
    holdLookup = true;
    const { run } = await runs.start(StopInToolWorkflow, { then: 'throw' });
    const claim = oneClaim();
    await lookupEntered.promise;
    // Another worker took the run over (its epoch moved on): this worker's heartbeat finds it gone.
    await db.query(`update ai_runs set epoch = epoch + 1 where id = $1`, [run.id]);
    await worker.heartbeat();
    await claim;
    expect(server.modelRequests.map((r) => r.turn)).toEqual([1]);
    expect(await modelCallsStarted(run.id)).toBe(1);

    await requeue(run.id);
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');
    expect(done.output).toEqual({ text: ANSWER });
    // Turn 1 committed before the stop: never asked again. Turn 2 once, by the claim that held the lease.
    expect(server.modelRequests.map((r) => r.turn)).toEqual([1, 2, 3]);
  });

  for (const drop of [false, true]) {
    it(`a worker frozen past its lease inside the model call sends nothing when it wakes${drop ? ' (its fetch given no abort signal: the wire check alone)' : ''}`, async () => {
      fetches.length = 0;
      freezeNext = true;
      dropSignal = drop;
      const { run } = await runs.start(FrozenModelCallWorkflow, {});
      await oneClaim();
      // The provider's fetch was called once, after the freeze, and refused before a byte left.
      expect(fetches).toHaveLength(1);
      // The lease's local deadline passed: its timer aborted the run's signal (which the request
      // carries), or, without the signal, the fenced transport refused it where it met the socket.
      expect(fetches[0]).toMatch(drop ? /^refused: .*the wire check of step model:scripted-1/ : /^refused: /);
      expect(server.modelRequests).toHaveLength(0);
      const [stop] = await db.query<{ n: number }>(
        `select count(*)::int as n from ai_events where run_id = $1 and event_type = 'model.call_started'`,
        [run.id],
      );
      expect(stop.n).toBe(1);

      await requeue(run.id);
      const done = await driveUntil(app, db, run.id);
      expect(done.status).toBe('succeeded');
      expect(done.output).toEqual({ text: ANSWER });
      expect(server.modelRequests.map((r) => r.turn)).toEqual([1, 2, 3]);
      expect(fetches.slice(1)).toEqual(['sent', 'sent', 'sent']);
    });
  }
});
