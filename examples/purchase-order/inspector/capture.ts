/**
 * Screenshots of the run inspector in headless Chromium (Debian's `chromium`, driven by playwright-core):
 * the runs list with its status counts, and one run that the rolling deploy interrupted and another
 * worker resumed. The run is chosen from the admin API: among the runs with an epoch of 2 or more, one
 * whose timeline has a takeover (its worker was SIGKILLed; the reconciler handed the run back when the
 * lease expired), preferring one with a command the takeover found in doubt; failing that, a handover
 * (a SIGTERMed worker drained and released it).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { AdminRunDetail, AdminRunPage } from '../../../src/admin'; // in an app: 'nestjs-durable-execution/admin'

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-quic',
  '--no-first-run',
];

export interface CaptureOptions {
  /** The inspector's URL, e.g. `http://127.0.0.1:3001/durable`. */
  url: string;
  /** Sent as `x-api-key`; null when the inspector is anonymous. */
  key: string | null;
  outDir: string;
  /** File names: `<prefix>-runs.png` and `<prefix>-run.png`. Default `demo-inspector`. */
  prefix?: string;
  /** Default `CHROMIUM_PATH`, else `/usr/bin/chromium`. */
  chromiumPath?: string;
  /** Viewport width in CSS pixels. Default 1400. */
  width?: number;
  /** Rows of the runs list to show. Default 30. */
  listLimit?: number;
  /** Prefer a run taken over from one of these workers (the demo passes the ones its deploy SIGKILLed). */
  preferTakeoverFrom?: string[];
}

export interface Capture {
  runsPng: string;
  runPng: string;
  runId: string;
  orderRef: string | null;
  /** Why this run: `takeover` (with or without commands in doubt) or `handover`. */
  shows: string;
  workers: string[];
}

type Timeline = AdminRunDetail['timeline'];

function score(t: Timeline, preferFrom: string[]): number {
  const takeover = t.epochs.find((e) => e.start === 'takeover');
  const inDoubt = Array.isArray(takeover?.takeover?.inDoubt) && (takeover.takeover.inDoubt as []).length > 0;
  const fromKilled = preferFrom.includes(String(takeover?.takeover?.previousWorker));
  const handovers = t.epochs.filter((e) => e.start === 'handover').length;
  // One takeover with a command in doubt tells the whole story; fewer epochs keep the page short.
  return (
    (t.takeovers === 1 ? 1000 : t.takeovers > 1 ? 600 : 0) +
    (fromKilled ? 400 : 0) +
    (inDoubt ? 300 : 0) +
    (handovers ? 50 : 0) -
    10 * t.epochs.length
  );
}

function describe(t: Timeline): string {
  const takeover = t.epochs.find((e) => e.start === 'takeover');
  if (takeover) {
    const doubt = (takeover.takeover?.inDoubt as unknown[] | undefined)?.length ?? 0;
    return `takeover from ${takeover.takeover?.previousWorker ?? '?'} to ${takeover.workerId ?? '?'}${
      doubt ? `, ${doubt} command(s) in doubt settled by lookup` : ''
    }`;
  }
  const handover = t.epochs.find((e) => e.start === 'handover');
  return handover ? `handover to ${handover.workerId ?? '?'} (drained on SIGTERM)` : 'resumed';
}

/** An interrupted and resumed run, found through the admin API. */
export async function pickInterruptedRun(
  url: string,
  key: string | null,
  preferTakeoverFrom: string[] = [],
): Promise<{ id: string; detail: AdminRunDetail } | null> {
  const headers: Record<string, string> = {
    accept: 'application/json',
    ...(key ? { 'x-api-key': key } : {}),
  };
  const get = async <T>(p: string): Promise<T> => {
    const res = await fetch(`${url}/api${p}`, { headers });
    if (!res.ok) throw new Error(`GET ${url}/api${p}: HTTP ${res.status} ${await res.text()}`);
    return (await res.json()) as T;
  };
  const resumed: string[] = [];
  let after: string | undefined;
  do {
    const page = await get<AdminRunPage>(
      `/runs?kind=purchase-order&limit=500${after ? `&after=${encodeURIComponent(after)}` : ''}`,
    );
    for (const r of page.items) if (r.epoch >= 2 && r.status === 'succeeded') resumed.push(r.id);
    after = page.next;
  } while (after && resumed.length < 200);
  let best: { id: string; detail: AdminRunDetail; score: number } | null = null;
  for (const id of resumed.slice(0, 120)) {
    const detail = await get<AdminRunDetail>(`/runs/${id}`);
    const s = score(detail.timeline, preferTakeoverFrom);
    if (detail.timeline.epochs.some((e) => e.start === 'takeover' || e.start === 'handover'))
      if (!best || s > best.score) best = { id, detail, score: s };
  }
  return best && { id: best.id, detail: best.detail };
}

export async function captureInspector(o: CaptureOptions): Promise<Capture> {
  const url = o.url.replace(/\/+$/, '');
  const prefix = o.prefix ?? 'demo-inspector';
  fs.mkdirSync(o.outDir, { recursive: true });
  const picked = await pickInterruptedRun(url, o.key, o.preferTakeoverFrom);
  if (!picked) throw new Error('no purchase-order run was interrupted and resumed: nothing to show');

  // playwright-core is a devDependency: loaded only when screenshots are asked for.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { chromium } = require('playwright-core') as typeof import('playwright-core');
  const browser = await chromium.launch({
    executablePath: o.chromiumPath ?? process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: CHROMIUM_ARGS,
    headless: true,
  });
  try {
    const context = await browser.newContext({
      extraHTTPHeaders: o.key ? { 'x-api-key': o.key } : {},
      viewport: { width: o.width ?? 1400, height: 900 },
    });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('pageerror', (err) => problems.push(err.message));

    const runsPng = path.join(o.outDir, `${prefix}-runs.png`);
    await page.goto(`${url}?kind=purchase-order&limit=${o.listLimit ?? 30}`);
    await page.getByTestId('count-succeeded').waitFor();
    await page.screenshot({ path: runsPng, fullPage: true });

    const runPng = path.join(o.outDir, `${prefix}-run.png`);
    await page.goto(`${url}/runs/${picked.id}`);
    await page.getByTestId('run-status').waitFor();
    const marks = await page.locator('[data-testid=takeover], [data-testid=handover]').count();
    if (!marks) throw new Error(`run ${picked.id}: the page shows no takeover or handover`);
    await page.screenshot({ path: runPng, fullPage: true });
    if (problems.length) throw new Error(`the inspector page reported errors: ${problems.join('; ')}`);
    await context.close();
    return {
      runsPng,
      runPng,
      runId: picked.id,
      orderRef: picked.detail.run.idempotencyKey ?? null,
      shows: describe(picked.detail.timeline),
      workers: picked.detail.timeline.workers,
    };
  } finally {
    await browser.close();
  }
}
