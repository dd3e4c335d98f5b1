/**
 * `npm run start:demo`: the purchase-order service on http://127.0.0.1:3000 (PORT to change it), with
 * the simulated vendors and model on loopback and PostgreSQL from DATABASE_URL or an embedded one.
 *
 *   curl -s -XPOST localhost:3000/orders -H 'content-type: application/json' \
 *     -d '{"orderRef":"PO-2026-0041","channel":"portal","text":"240 lines for the Rotterdam site"}'
 *   curl -s localhost:3000/orders/<id>
 *
 * The run inspector is at /durable (admin API at /durable/api), behind `ApiKeyAdminGuard`: the key is
 * DEMO_ADMIN_KEY (16+ characters), else one made at start-up and printed with a sign-in link;
 * DEMO_ADMIN_ANONYMOUS=1 serves it without a key (a local demo only).
 */
import 'reflect-metadata';
import { openDemoDatabase } from '../orchestrator/database';
import { onShutdown, runCleanups } from '../orchestrator/shutdown';
import { demoAdminAccess, describeAccess } from '../inspector/admin-access';
import { startSimulatedServices } from '../simulated/services';
import { createOrdersApp } from './orders.app';

async function main() {
  const log = (s: string) => process.stdout.write(`${s}\n`);
  const timeScaleMs = Number(process.env.DEMO_TIME_SCALE_MS ?? 10); // a run takes about 3.5 s
  const admin = demoAdminAccess(); // before anything starts: a bad DEMO_ADMIN_KEY stops here
  const db = await openDemoDatabase({ databaseUrl: process.env.DATABASE_URL, label: 'app', log });
  onShutdown(() => db.close());
  const services = await startSimulatedServices({ timeScaleMs });
  onShutdown(() => services.close());
  const app = await createOrdersApp({ databaseUrl: db.url, services: services.settings, timeScaleMs, admin });
  onShutdown(() => app.close()); // drains the worker: in-flight runs are handed back, not lost
  const port = Number(process.env.PORT ?? 3000);
  await app.listen(port, '127.0.0.1');
  log(`purchase-order service on http://127.0.0.1:${port} (database: ${db.source})`);
  log(
    `  curl -s -XPOST localhost:${port}/orders -H 'content-type: application/json' ` +
      `-d '{"orderRef":"PO-2026-0041","channel":"portal","text":"240 lines for the Rotterdam site"}'`,
  );
  log(`  curl -s localhost:${port}/orders/<id>`);
  for (const line of describeAccess(`http://127.0.0.1:${port}`, admin)) log(line);
}

main().catch(async (err) => {
  console.error(err);
  await runCleanups();
  process.exit(1);
});
