/**
 * `npm run demo:agent`: the support-triage agent (AI SDK, `generateText` with tools) killed between a
 * refund and its record, and taken over by another process.
 *
 * One ticket ("order #1042 arrived damaged"), twice, each time against fresh loopback servers (the
 * scripted model and the shop, payment and mail vendors, all in this process, all counting):
 *
 * 1. uninterrupted: one app process (http/main.ts: Nest, `POST /tickets`, a worker) runs it to the end;
 * 2. crashed: the first app process is SIGKILLed by the payment vendor the moment it applied the
 *    refund, before its answer leaves (the refund left the worker; its result never committed). A
 *    second app process starts, takes the run over when the lease runs out, and finishes it.
 *
 * Then it prints what the model and the vendors counted, side by side, and exits 1 unless the crashed
 * run made one refund per toolCallId, one email, no request for a committed turn, and the same answer.
 *
 *   npm run demo:agent                      # DATABASE_URL, else an embedded PostgreSQL
 */
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openDemoDatabase } from '../purchase-order/orchestrator/database';
import { onShutdown, runCleanups, shutdownSignal } from '../purchase-order/orchestrator/shutdown';
import { startModelServer } from './loopback/model-server';
import { ledger, startVendors } from './loopback/vendors';
import { AppProcess, poll, queryOnce, spawnApp, stopApp } from './processes';
import { renderReport, verdict } from './report';
import { prepareAppRuntime } from './runtime';
import type { TriageResult } from './triage.workflow';

export interface TriageDemoOptions {
  /** A server to use (the demo creates a database of its own on it); default DATABASE_URL, else embedded. */
  databaseUrl?: string;
  /** Use `databaseUrl` itself (a fresh database, e.g. a test's). */
  databaseAsIs?: boolean;
  /** Where the progress lines and the report go (default stdout). */
  out?: (line: string) => void;
  /** The app processes' lease: a SIGKILLed process's run is taken over after it. Default 2000 ms. */
  leaseTtlMs?: number;
  /** Give up waiting for a run after this long. Default 30 s. */
  runTimeoutMs?: number;
}

/** One run of the ticket, and what the loopback servers counted. */
export interface ScenarioReport {
  ticketId: string;
  runId: string;
  status: string;
  answer: string | null;
  output: TriageResult | null;
  /** The run's epoch (1: one claim; 2: taken over once). */
  epoch: number;
  /** The app processes, in order, with how each ended. */
  processes: Array<{ name: string; ended: string }>;
  /** The turn of every model request, in the order the model server got them. */
  modelRequests: number[];
  ledger: ReturnType<typeof ledger>;
  /** The run's commands as stored: how an in-doubt one was settled (`lookup`), or null. */
  commands: Array<{ name: string; status: string; resolution: string | null }>;
  /** Crashed only: the model requests made before the SIGKILL (their turns had committed). */
  requestsBeforeKill?: number[];
  /** Crashed only: from the SIGKILL until the run succeeded on the second process. */
  takeoverMs?: number;
  /** `POST /tickets` with the same ticket once the run finished: 200 and the same run. */
  repeatedPost: { status: number; sameRun: boolean };
  ms: number;
}

export interface TriageDemoReport {
  uninterrupted: ScenarioReport;
  crashed: ScenarioReport;
  /** Model turns of the uninterrupted run (its `steps.length`). */
  turns: number;
  sameAnswer: boolean;
  ok: boolean;
  logDir: string;
}

export const TICKET = {
  from: 'ana@example.com',
  text: 'Order #1042 arrived damaged: the grinder is cracked. Please refund it.',
};

/** The loopback model and vendors for one run of the ticket. */
async function stage() {
  const model = await startModelServer();
  const vendors = await startVendors();
  return { model, vendors, settings: { modelBaseURL: model.baseURL, vendorsUrl: vendors.url } };
}

export async function runTriageDemo(opts: TriageDemoOptions = {}): Promise<TriageDemoReport> {
  const out = opts.out ?? ((line: string) => process.stdout.write(`${line}\n`));
  const runTimeoutMs = opts.runTimeoutMs ?? 30_000;
  const t0 = Date.now();
  const since = () => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'triage-demo-logs-'));
  const tag = randomBytes(3).toString('hex'); // ticket ids of their own, should the database be shared
  out('support-triage demo: one ticket, an AI SDK agent in a Nest app, run twice: uninterrupted, and');
  out('with its process SIGKILLed after the refund left it and before the refund was recorded.');
  const db = await openDemoDatabase({
    databaseUrl: opts.databaseUrl ?? process.env.DATABASE_URL,
    asIs: opts.databaseAsIs,
    label: 'triage',
    log: out,
  });
  onShutdown(() => db.close());
  const runtime = prepareAppRuntime();
  const apps: AppProcess[] = [];
  onShutdown(async () => {
    for (const a of apps) a.child.kill('SIGKILL');
  });
  const sql = <T>(text: string, params: unknown[]) => queryOnce<T>(db.url, text, params);

  const ended = async (a: AppProcess) => {
    const e = await a.exited;
    return { name: a.name, ended: e.signal ?? `exit ${e.code}` };
  };
  // Fresh loopback servers for each run of the ticket, and the app processes: desk-1 for the
  // uninterrupted run; desk-2, and desk-3 to replace it, for the crashed one. desk-2 and desk-3 load
  // their code now and boot when their turn comes (a replacement pod is pulled before it is needed).
  const stages = [await stage(), await stage()];
  onShutdown(async () => {
    for (const st of stages) await Promise.all([st.model.close(), st.vendors.close()]);
  });
  const launch = (name: string, st: (typeof stages)[number], deferred: boolean) => {
    const env = { databaseUrl: db.url, settings: st.settings, leaseTtlMs: opts.leaseTtlMs, deferred };
    const app = spawnApp(runtime, name, env, logDir);
    apps.push(app);
    return app;
  };
  const desks = [launch('desk-1', stages[0], false), launch('desk-2', stages[1], true)];
  desks.push(launch('desk-3', stages[1], true));
  out(`${since()}: starting desk-1; loading desk-2 and desk-3 (app processes: logs in ${logDir})`);

  const scenario = async (crash: boolean): Promise<ScenarioReport> => {
    const { model, vendors } = stages[crash ? 1 : 0];
    const first = desks[crash ? 1 : 0];
    const heir = crash ? desks[2] : undefined;
    await Promise.all([first.loaded, heir?.loaded]);
    first.start();
    const url = await first.ready;
    out(`${since()}: ${first.name} up (Nest app, worker)${crash ? `; ${heir!.name} loaded, waiting` : ''}`);
    let killedAt = 0;
    let requestsBeforeKill: number[] | undefined;
    if (crash)
      vendors.onRefundApplied = (refund) => {
        first.child.kill('SIGKILL'); // the refund is applied; its answer never reaches the worker
        killedAt = Date.now();
        requestsBeforeKill = model.requests.map((r) => r.turn);
        out(
          `${since()}: ${first.name} SIGKILLed at the payment vendor: refund ${refund.refundId} applied, no answer sent`,
        );
        return true;
      };
    const ticketId = `T-1042-${tag}${crash ? '' : '-control'}`;
    const started = Date.now();
    const post = (base: string) =>
      fetch(`${base}/tickets`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ticketId, ...TICKET }),
      });
    const res = await post(url);
    if (res.status !== 201) throw new Error(`POST /tickets: ${res.status} ${await res.text()}`);
    const { id } = (await res.json()) as { id: string };
    out(`${since()}: POST ${url}/tickets on ${first.name}: run ${id}`);
    let viewer = url;
    const processes: ScenarioReport['processes'] = [];
    if (crash) {
      const gone = () => first.child.exitCode !== null || first.child.signalCode !== null;
      await poll(async () => (gone() ? true : undefined), runTimeoutMs, `${first.name} to be killed`);
      processes.push(await ended(first));
      heir!.start(); // desk-3 boots now; its worker claims the run once desk-2's lease ran out
      viewer = await heir!.ready;
      out(`${since()}: ${heir!.name} up; it takes the run over once ${first.name}'s lease runs out`);
    }
    const view = await poll(
      async () => {
        const res = await fetch(`${viewer}/tickets/${id}`).catch(() => null);
        const v = (await res?.json()) as { status: string; answer: string } | undefined;
        if (!v) return undefined;
        if (['failed', 'cancelled', 'dead_lettered'].includes(v.status)) throw new Error(`run ${v.status}`);
        return v.status === 'succeeded' ? v : undefined;
      },
      runTimeoutMs,
      `run ${id} to succeed (logs in ${logDir})`,
    );
    const takeoverMs = crash ? Date.now() - killedAt : undefined;
    out(`${since()}: GET ${viewer}/tickets/${id}: ${view.status}`);
    const again = await post(viewer); // the same ticket again: the same run, nothing started
    const repeatedPost = {
      status: again.status,
      sameRun: ((await again.json()) as { id: string }).id === id,
    };
    for (const a of crash ? [heir!] : [first]) {
      await stopApp(a);
      processes.push(await ended(a));
    }
    const [run] = await sql<{ status: string; epoch: string; output: TriageResult }>(
      `select status, epoch, output from ai_runs where id = $1`,
      [id],
    );
    const commands = await sql<ScenarioReport['commands'][number]>(
      `select command_name as name, status, resolution from ai_commands where run_id = $1 order by step_index`,
      [id],
    );
    return {
      ticketId,
      runId: id,
      status: run.status,
      answer: run.output?.answer ?? null,
      output: run.output,
      epoch: Number(run.epoch),
      processes,
      modelRequests: model.requests.map((r) => r.turn),
      ledger: ledger(vendors),
      commands,
      requestsBeforeKill,
      takeoverMs,
      repeatedPost,
      ms: Date.now() - started,
    };
  };

  try {
    const uninterrupted = await scenario(false);
    const crashed = await scenario(true);
    const report: TriageDemoReport = { uninterrupted, crashed, ...verdict(uninterrupted, crashed), logDir };
    for (const line of renderReport(report)) out(line);
    return report;
  } finally {
    await runCleanups();
  }
}

if (require.main === module) {
  runTriageDemo()
    .then((r) => process.exit(r.ok ? 0 : 1))
    .catch((err) => {
      if (shutdownSignal()) return; // Ctrl-C: the shutdown handler exits once everything is stopped
      console.error(err);
      process.exit(1);
    });
}
