/**
 * The app of the upgrade test (test/upgrade/upgrade.upgrade-spec.ts), compiled twice from this one file:
 * against the previous release's library (test/upgrade/previous-release.ts copies it into that release's
 * tree) and against this checkout's (test/helpers/compiled.ts). So it uses only what both releases have.
 * One agent-like workflow: a model step, a crawl step that records its place with ctx.progress() and
 * resumes from ctx.resumePoint(), a charge at a vendor that does not deduplicate (`inDoubt: 'lookup'`),
 * a durable sleep, an optional wait for a signal, a last step. Every step writes an effect row outside the
 * engine (upgrade_effects), with the release and process that ran it.
 * Env: DB_URL, TARGET_URL, RELEASE (the label written with each effect), ROLE (`worker`, or `api`: no
 * worker; answers the test's requests over IPC), WORKER_ID, CONCURRENCY, EXTRA_KIND, LEASE_TTL_MS, HEARTBEAT_MS.
 */
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Pool } from 'pg';
import {
  CommandContext,
  CommandLookup,
  currentRun,
  DurableExecutionModule,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  RunContext,
  RunRepository,
} from '../../src';

/** What a run does: `items` crawl items of `itemMs`, a sleep of `sleepMs`, a signal when `wait`. */
export interface UpgradeInput {
  items: number;
  itemMs: number;
  sleepMs: number;
  wait: boolean;
  /** The vendor holds this run's charge unanswered (a charge in flight when its worker is killed). */
  hold?: boolean;
}

const url = process.env.DB_URL ?? '';
const target = () => process.env.TARGET_URL ?? '';
let effects: Pool | undefined;
const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One effect row (the ground truth of what ran where, written by the step body itself). */
async function effect(step: string, item: number | null = null): Promise<void> {
  effects ??= new Pool({ connectionString: url, max: 2 });
  await effects.query(
    `insert into upgrade_effects (run_id, step, item, release, pid) values ($1, $2, $3, $4, $5)`,
    [currentRun()!.runId, step, item, process.env.RELEASE ?? '?', process.pid],
  );
}

@Injectable()
export class AgentSteps {
  @DurableStep({ name: 'model', kind: 'model' })
  async model(question: string) {
    await delay(100);
    await effect('model');
    return { answer: `refund for ${question}` };
  }

  /** Items from the last recorded place on: an item is never run again once its progress committed. */
  @DurableStep({ name: 'crawl' })
  async crawl(items: number, itemMs: number) {
    const ctx = currentRun()!;
    let done = ctx.resumePoint()?.item ?? 0;
    while (done < items) {
      await effect('crawl', done);
      await delay(itemMs);
      done++;
      await ctx.progress(done, done);
    }
    return { crawled: done };
  }

  /** After the sleep: when it woke (against the due time its `$sleep` record holds). */
  @DurableStep({ name: 'woke' })
  async woke() {
    await effect('woke');
    return 'woke';
  }

  @DurableStep({ name: 'finish' })
  async finish() {
    await effect('finish');
    return 'done';
  }
}

/** The charge: applied by the vendor at receipt, once per request (it does not deduplicate keys). */
@Injectable()
export class Payments implements CommandLookup {
  @IdempotentCommand({ name: 'charge', inDoubt: 'lookup' })
  async charge(args: { amount: number; hold: boolean }, ctx?: CommandContext) {
    const res = await fetch(`${target()}/charge`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ key: ctx!.idempotencyKey, amount: args.amount, hold: args.hold }),
    });
    if (!res.ok) throw new Error(`charge failed with HTTP ${res.status}`);
    return (await res.json()) as { chargeId: string };
  }

  async lookupCommand(_command: string, key: string) {
    const res = await fetch(`${target()}/charge/${encodeURIComponent(key)}`);
    return (await res.json()) as { found: true; result: unknown } | { found: false };
  }
}

@DurableWorkflow('upgrade-agent', { maxAttempts: 20 })
export class UpgradeAgent {
  constructor(
    private readonly steps: AgentSteps,
    private readonly payments: Payments,
  ) {}

  async run(input: UpgradeInput, ctx: RunContext) {
    const model = await this.steps.model(ctx.runId.slice(0, 8));
    const crawl = await this.steps.crawl(input.items, input.itemMs);
    const charged = await this.payments.charge({ amount: 100, hold: input.hold === true });
    await ctx.sleep(input.sleepMs);
    await this.steps.woke();
    const approval = input.wait ? await ctx.waitForSignal<{ ok: boolean }>('approve') : null;
    await this.steps.finish();
    return { model, crawl, charged, approval };
  }
}

/**
 * The same agent under a kind that only the processes started with EXTRA_KIND register: a worker claims
 * only kinds it has, so the test decides which workers may take these runs.
 */
@DurableWorkflow('upgrade-agent-b', { maxAttempts: 20 })
export class UpgradeAgentB extends UpgradeAgent {}

const role = process.env.ROLE ?? 'worker';

@Module({
  imports: [
    DurableExecutionModule.forRoot({
      database: { url, poolSize: 4 },
      worker: {
        enabled: role === 'worker',
        concurrency: Number(process.env.CONCURRENCY ?? 6),
        pollIntervalMs: 100,
        leaseTtlMs: Number(process.env.LEASE_TTL_MS ?? 1500),
        heartbeatMs: Number(process.env.HEARTBEAT_MS ?? 400),
        drainTimeoutMs: 3000,
        ...(process.env.WORKER_ID ? { workerId: process.env.WORKER_ID } : {}),
      },
      reconciler: { intervalMs: 200, backoffBaseMs: 10, backoffMaxMs: 100 },
    }),
  ],
  providers: [AgentSteps, Payments, UpgradeAgent, ...(process.env.EXTRA_KIND ? [UpgradeAgentB] : [])],
})
export class UpgradeAppModule {}

/** A request of the test to the API process, and its answer. */
export type ApiRequest =
  | { id: number; op: 'start'; input: UpgradeInput; kind?: string }
  | { id: number; op: 'get'; runId: string }
  | { id: number; op: 'signal'; runId: string; payload: unknown };
export type ApiAnswer =
  { id: number; ok: true; value: unknown } | { id: number; ok: false; code: string; message: string };

async function main() {
  const app = await NestFactory.createApplicationContext(UpgradeAppModule, { logger: ['error', 'warn'] });
  app.enableShutdownHooks();
  if (role === 'api') {
    const runs = app.get(RunRepository);
    process.on('message', (m: ApiRequest) => {
      const call =
        m.op === 'start'
          ? runs.start(m.kind ?? 'upgrade-agent', m.input).then((s) => s.run.id)
          : m.op === 'get'
            ? runs.get(m.runId).then((r) => r?.status ?? null)
            : runs.signal(m.runId, 'approve', m.payload).then(() => null);
      call.then(
        (value) => process.send!({ id: m.id, ok: true, value } satisfies ApiAnswer),
        (e: { code?: string; message?: string }) =>
          process.send!({
            id: m.id,
            ok: false,
            code: String(e.code),
            message: String(e.message),
          } satisfies ApiAnswer),
      );
    });
  }
  process.send?.('ready');
}

if (require.main === module) void main();
