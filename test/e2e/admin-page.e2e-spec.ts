import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { INestApplication } from '@nestjs/common';
import type { Browser } from 'playwright-core';
import { CommandGateway, RunRepository } from '../../src';
import { ApiKeyAdminGuard, DurableAdminModule } from '../../src/admin';
import { runDurableMigrations } from '../../src/migrations';
import { driveRun, releaseCrashedRuns, runWorkerUntilCrash } from '../../src/testing';
import { bootHttpApp } from '../helpers/app';
import { describeWithBrowser, launchChromium } from '../helpers/browser';
import { compiledEntry } from '../helpers/compiled';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * The run inspector in a real browser (Debian's chromium driven by playwright-core): a purchase order is
 * taken by a worker process that is killed right after its quote step commits; this process takes the
 * run over, which parks for an operator's approval of the payment. The operator opens the inspector,
 * sees the two workers and the takeover in the timeline, clicks Approve, and watches the run finish.
 */
const KEY = 'inspector-key-0123456789';
const ARTIFACTS = path.join(__dirname, '..', 'artifacts');

describeWithBrowser('run inspector page (headless Chromium)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let browser: Browser;
  let base: string;

  beforeAll(async () => {
    db = await createTestDatabase('admin_page');
    await runDurableMigrations({ type: 'postgres', url: db.url });
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const fx = require('../fixtures/approval-worker-app');
    const booted = await bootHttpApp(db.url, {
      imports: [
        DurableAdminModule.forRoot({
          path: 'durable',
          guard: new ApiKeyAdminGuard({ keys: { [KEY]: 'ops-oncall' } }),
        }),
      ],
      providers: [fx.OrderAgent, fx.PaymentRelease, fx.ApprovalOrderWorkflow],
    });
    app = booted.app;
    base = `${booted.http}/durable`;
    browser = await launchChromium();
    mkdirSync(ARTIFACTS, { recursive: true });
  });
  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await db?.drop();
  });

  it('shows a crashed and resumed run, its takeover, and the run finishing after Approve is clicked', async () => {
    const runs = app.get(RunRepository);
    const { run } = await runs.start('po-approval', { orderRef: 'PO-2026-0041' });

    // A worker process takes the run and dies right after the quote step (index 2) commits.
    const crashed = await runWorkerUntilCrash({
      entry: compiledEntry(path.join(__dirname, '..', 'fixtures', 'approval-worker-app.ts')),
      crashAt: 'after-step-commit@2',
      env: { DB_URL: db.url },
    });
    expect(await releaseCrashedRuns(app, crashed)).toBe(1);
    // This process resumes it: replays steps 0-2, then parks for the payment's approval.
    const parked = await driveRun(app, run.id, ['waiting']);
    expect(parked.parkedReason).toMatch(/awaiting approval/);

    const context = await browser.newContext({
      extraHTTPHeaders: { 'x-api-key': KEY },
      viewport: { width: 1280, height: 900 },
    });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('pageerror', (err) => problems.push(err.message));
    page.on('console', (msg) => msg.type() === 'error' && problems.push(msg.text()));

    await page.goto(base);
    await page.locator(`[data-run-id="${run.id}"]`).waitFor();
    expect(await page.getByTestId('count-waiting').innerText()).toMatch(/1/);
    await page.screenshot({ path: path.join(ARTIFACTS, 'inspector-runs.png'), fullPage: true });
    await page.locator(`[data-run-id="${run.id}"] a`).click();
    await page.getByTestId('run-status').waitFor();
    expect(await page.getByTestId('run-status').innerText()).toBe('waiting');

    // The takeover: epoch 1 on the killed worker, epoch 2 on this process, called out between them.
    const takeover = page.getByTestId('takeover');
    expect(await takeover.count()).toBe(1);
    expect(await takeover.getAttribute('data-from')).toContain(`:${crashed.pid}:`);
    expect(await takeover.innerText()).toMatch(/stopped renewing its lease/);
    const workers = await page
      .locator('[data-testid=epoch][data-worker]:not([data-worker=""])')
      .evaluateAll((els) => els.map((e) => e.getAttribute('data-worker')));
    expect(new Set(workers).size).toBe(2);
    expect(await page.getByTestId('workers').innerText()).toMatch(/^2 /);
    expect(await page.locator('[data-testid=step][data-state=done]').count()).toBe(3); // $uuid, parse, quote

    await page.screenshot({ path: path.join(ARTIFACTS, 'inspector-approval.png'), fullPage: true });

    // The operator approves the payment from the page.
    await page.locator('[data-testid=approval-3] input[name=note]').fill('checked with the buyer');
    await page.locator('[data-testid=approval-3] button[data-action=approve]').click();
    await page.locator('#flash.ok').filter({ hasText: 'approve recorded (by ops-oncall)' }).waitFor();
    const commands = app.get(CommandGateway);
    expect((await commands.listForRun(run.id))[0].status).toBe('approved');

    // A worker picks the run up again; the live page reloads itself and shows the run finished.
    expect((await driveRun(app, run.id)).status).toBe('succeeded');
    await page.getByTestId('run-status').filter({ hasText: 'succeeded' }).waitFor({ timeout: 15_000 });
    expect(await page.locator('[data-testid=command][data-status=succeeded]').count()).toBe(1);
    expect(await page.locator('[data-testid=event][data-type="run.succeeded"]').count()).toBe(1);
    await page.screenshot({ path: path.join(ARTIFACTS, 'inspector-run.png'), fullPage: true });

    const approved = (await runs.events(run.id)).find((e) => e.type === 'command.approved');
    expect(approved?.payload).toMatchObject({ by: 'ops-oncall', note: 'checked with the buyer' });
    expect(problems).toEqual([]);
    await context.close();
  });
});
