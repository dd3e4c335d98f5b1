/**
 * Time travel in the run inspector, in a real browser (Debian's chromium driven by playwright-core): an
 * agent run that failed at step 7 shows "Fork from here" on each step; the operator forks from step 7
 * under the fixed version and lands on the fork's page, which links back to the original ("forked from
 * ... at step 7") while the original's page lists its fork; the fork finishes. A refused fork (no choice
 * made about a running original, a cut through a Promise.all) is shown, not written.
 */
import { INestApplication } from '@nestjs/common';
import type { Browser, Page } from 'playwright-core';
import { RunRepository } from '../../src';
import { ApiKeyAdminGuard, DurableAdminModule } from '../../src/admin';
import { AgentV1, DoubtWorkflow, FanoutWorkflow, forkEnv, FORK_PROVIDERS } from '../fixtures/fork-agent-app';
import { bootHttpApp } from '../helpers/app';
import { describeWithBrowser, launchChromium } from '../helpers/browser';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';
import { FakeTarget, startFakeTarget } from '../helpers/fake-target';
import { ModelServer, startModelServer } from '../helpers/model-server';

const KEY = 'inspector-key-0123456789';

describeWithBrowser('fork from the run inspector (headless Chromium)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let browser: Browser;
  let base: string;
  let runs: RunRepository;
  let model: ModelServer;
  let vendor: FakeTarget;

  beforeAll(async () => {
    db = await createTestDatabase('fork_page');
    model = await startModelServer();
    vendor = await startFakeTarget();
    forkEnv.modelUrl = model.url;
    forkEnv.vendorUrl = vendor.url;
    const booted = await bootHttpApp(db.url, {
      imports: [
        DurableAdminModule.forRoot({
          path: 'durable',
          guard: new ApiKeyAdminGuard({ keys: { [KEY]: 'ops-oncall' } }),
        }),
      ],
      providers: FORK_PROVIDERS,
    });
    app = booted.app;
    base = `${booted.http}/durable`;
    runs = app.get(RunRepository);
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await model?.close();
    await vendor?.close();
    await db?.drop();
  });

  async function openPage(): Promise<{ page: Page; problems: string[]; close: () => Promise<void> }> {
    const context = await browser.newContext({ extraHTTPHeaders: { 'x-api-key': KEY } });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('pageerror', (err) => problems.push(err.message));
    return { page, problems, close: () => context.close() };
  }

  it('forks a failed run from step 7 under the fixed version, and links both pages', async () => {
    const { run } = await runs.start(AgentV1, { task: 'refund order 31' });
    expect((await driveUntil(app, db, run.id)).status).toBe('failed');
    const { page, problems, close } = await openPage();
    await page.goto(`${base}/runs/${run.id}`);
    await page.getByTestId('run-status').filter({ hasText: 'failed' }).waitFor();
    expect(await page.locator('[data-testid^=fork-]').count()).toBeGreaterThanOrEqual(8);
    expect(await page.getByTestId('forks').count()).toBe(0);

    await page.locator('[data-testid=fork-7] input[name=version]').fill('2');
    await page.locator('[data-testid=fork-7] button[data-action=fork]').click();
    // The fork's own page, linked to its original.
    await page.getByTestId('forked-from').waitFor();
    expect(await page.getByTestId('forked-from').innerText()).toBe(`${run.id.slice(0, 8)} at step 7`);
    await page.locator('#flash.ok').filter({ hasText: 'fork recorded (by ops-oncall)' }).waitFor();
    const forkId = /\/runs\/([0-9a-f-]{36})$/.exec(page.url())![1];
    expect((await runs.get(forkId))!.forkedFrom).toEqual({ runId: run.id, fromStep: 7 });

    // A worker runs it; the live page reloads and shows it finished.
    expect((await driveUntil(app, db, forkId)).status).toBe('succeeded');
    await page.getByTestId('run-status').filter({ hasText: 'succeeded' }).waitFor({ timeout: 15_000 });
    expect(model.asked.filter((a) => a.run === forkId).map((a) => a.step)).toEqual([7, 9]);

    await page.getByTestId('forked-from').locator('a').click();
    await page.getByTestId('forks').waitFor();
    expect(await page.getByTestId('forks').innerText()).toContain(`${forkId.slice(0, 8)} (from step 7)`);
    expect(problems).toEqual([]);
    await close();
  });

  it('rewinds a failed run in place from the page: the same run, its next generation', async () => {
    const { run } = await runs.start(AgentV1, { task: 'refund order 32' });
    expect((await driveUntil(app, db, run.id)).status).toBe('failed');
    const { page, problems, close } = await openPage();
    await page.goto(`${base}/runs/${run.id}`);
    await page.getByTestId('run-status').filter({ hasText: 'failed' }).waitFor();
    await page.locator('[data-testid=fork-7] input[name=version]').fill('2');
    await page.locator('[data-testid=fork-7] input[name=inPlace]').check();
    await page.locator('[data-testid=fork-7] button[data-action=fork]').click();
    // The same page again, the run waiting under generation 1 (no fork made).
    await page.locator('#flash.ok').filter({ hasText: 'fork recorded (by ops-oncall)' }).waitFor();
    expect(page.url()).toBe(`${base}/runs/${run.id}`);
    expect(await page.getByTestId('run-status').innerText()).toMatch(/waiting|pending/);
    expect(await runs.get(run.id)).toMatchObject({ generation: 1, version: 2 });
    expect(await db.query(`select count(*)::int as n from ai_runs where forked_from = $1`, [run.id])).toEqual(
      [{ n: 0 }],
    );
    expect((await driveUntil(app, db, run.id)).status).toBe('succeeded');
    await page.getByTestId('run-status').filter({ hasText: 'succeeded' }).waitFor({ timeout: 15_000 });
    expect(problems).toEqual([]);
    await close();
  });

  it('shows why a fork is refused, and writes nothing', async () => {
    const { run: doubt } = await runs.start(DoubtWorkflow, { task: 'settle' });
    await driveUntil(app, db, doubt.id, ['waiting']);
    const { run: fan } = await runs.start(FanoutWorkflow, { task: 'fan' });
    expect((await driveUntil(app, db, fan.id)).status).toBe('succeeded');
    const { page, problems, close } = await openPage();
    // A run that has not ended: no choice made about it, and the API asks for one.
    await page.goto(`${base}/runs/${doubt.id}`);
    await page.getByTestId('run-status').filter({ hasText: 'waiting' }).waitFor();
    await page.locator('[data-testid=fork-1] button[data-action=fork]').click();
    await page.locator('#flash.err').filter({ hasText: 'original is required' }).waitFor();
    // A cut through a Promise.all: refused, the steps it may fork from named.
    await page.goto(`${base}/runs/${fan.id}`);
    await page.getByTestId('run-status').filter({ hasText: 'succeeded' }).waitFor();
    await page.locator('[data-testid=fork-1] button[data-action=fork]').click();
    await page.locator('#flash.err').filter({ hasText: 'Fork from step 0 or 2' }).waitFor();
    const forks = await db.query(
      `select count(*)::int as n from ai_runs where forked_from = any($1::uuid[])`,
      [[doubt.id, fan.id]],
    );
    expect(forks).toEqual([{ n: 0 }]);
    expect(problems).toEqual([]);
    await close();
  });
});
