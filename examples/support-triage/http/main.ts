/**
 * The support desk's process: the Nest app of tickets.app.ts on 127.0.0.1 (API and worker).
 *
 * Started by the demo (demo.ts) with TRIAGE_APP = JSON { databaseUrl, settings, workerId, port,
 * leaseTtlMs, deferred }: it reports `{ type: 'ready', url }` over IPC once it listens. Started by hand, it brings its own
 * loopback model and vendors, and PostgreSQL from DATABASE_URL or an embedded one:
 *
 *   node -r ts-node/register/transpile-only examples/support-triage/http/main.ts
 *   curl -s -XPOST localhost:3000/tickets -H 'content-type: application/json' \
 *     -d '{"ticketId":"T-1042","from":"ana@example.com","text":"Order #1042 arrived damaged. Refund please."}'
 *   curl -s localhost:3000/tickets/<id>
 */
import 'reflect-metadata';
import { openDemoDatabase } from '../../purchase-order/orchestrator/database';
import { onShutdown, runCleanups } from '../../purchase-order/orchestrator/shutdown';
import { startModelServer } from '../loopback/model-server';
import { startVendors } from '../loopback/vendors';
import type { TriageSettings } from '../triage.tools';
import { createTicketsApp } from './tickets.app';

interface AppEnv {
  databaseUrl: string;
  settings: TriageSettings;
  workerId?: string;
  port?: number;
  leaseTtlMs?: number;
  /** Load, say `loaded`, and boot only on a `start` message (a replacement already pulled). */
  deferred?: boolean;
}

async function fromDemo(env: AppEnv): Promise<void> {
  process.on('disconnect', () => process.kill(process.pid, 'SIGTERM')); // the demo is gone
  if (env.deferred) {
    process.send?.({ type: 'loaded' });
    await new Promise<void>((resolve) =>
      process.on('message', (m: { type?: string }) => m?.type === 'start' && resolve()),
    );
  }
  const app = await createTicketsApp(env);
  app.enableShutdownHooks(); // SIGTERM drains the worker: in-flight runs are handed back, not lost
  await app.listen(env.port ?? 0, '127.0.0.1');
  process.send?.({ type: 'ready', url: await app.getUrl() });
}

async function standalone(): Promise<void> {
  const log = (s: string) => process.stdout.write(`${s}\n`);
  const db = await openDemoDatabase({ databaseUrl: process.env.DATABASE_URL, label: 'triage-app', log });
  onShutdown(() => db.close());
  const model = await startModelServer();
  onShutdown(() => model.close());
  const vendors = await startVendors();
  onShutdown(() => vendors.close());
  const app = await createTicketsApp({
    databaseUrl: db.url,
    settings: { modelBaseURL: model.baseURL, vendorsUrl: vendors.url },
  });
  onShutdown(() => app.close());
  const port = Number(process.env.PORT ?? 3000);
  await app.listen(port, '127.0.0.1');
  log(`support desk on http://127.0.0.1:${port} (database: ${db.source})`);
  log(
    `  curl -s -XPOST localhost:${port}/tickets -H 'content-type: application/json' ` +
      `-d '{"ticketId":"T-1042","from":"ana@example.com","text":"Order #1042 arrived damaged. Refund please."}'`,
  );
  log(`  curl -s localhost:${port}/tickets/<id>`);
}

const env = process.env.TRIAGE_APP;
(env ? fromDemo(JSON.parse(env) as AppEnv) : standalone()).catch(async (err) => {
  console.error(err);
  await runCleanups();
  process.exit(1);
});
