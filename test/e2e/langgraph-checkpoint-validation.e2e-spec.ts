/**
 * `DurablePostgresSaver` against `@langchain/langgraph-checkpoint-validation`, LangGraph's own conformance
 * suite for checkpoint savers (put, putWrites, getTuple, list, deleteThread), on a database of its own
 * migrated by the module's migrations. The suite is vitest-based: it runs in a child process
 * (test/langgraph/checkpoint-validation.vitest.mts) and its JSON report is read back. The count is exact:
 * a suite that loaded no test, skipped one or lost one fails here.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runDurableMigrations } from '../../src/migrations';
import { createTestDatabase, TestDatabase } from '../helpers/database';

const ROOT = path.join(__dirname, '..', '..');
/** The suite's test count in @langchain/langgraph-checkpoint-validation 1.1.1. */
const EXPECTED_TESTS = 718;

interface VitestReport {
  numTotalTests: number;
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
  success: boolean;
  testResults: Array<{ assertionResults: Array<{ fullName: string; status: string }> }>;
}

function runSuite(
  env: Record<string, string>,
  report: string,
): Promise<{ code: number | null; out: string }> {
  const vitest = path.join(ROOT, 'node_modules', 'vitest', 'vitest.mjs');
  const args = [
    'run',
    '--config',
    'test/langgraph/vitest.config.mts',
    '--reporter=default',
    '--reporter=json',
  ];
  const child = spawn(process.execPath, [vitest, ...args, `--outputFile.json=${report}`], {
    cwd: ROOT,
    env: { ...process.env, ...env, NO_COLOR: '1', FORCE_COLOR: '0', CI: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, out })));
}

describe('langgraph: DurablePostgresSaver passes LangGraph checkpoint validation', () => {
  let db: TestDatabase;
  let dir: string;

  beforeAll(async () => {
    db = await createTestDatabase('lgvalidate');
    await runDurableMigrations({ type: 'postgres', url: db.url });
    dir = mkdtempSync(path.join(tmpdir(), 'lg-validation-'));
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await db?.drop();
  });

  it(`runs the whole suite: ${EXPECTED_TESTS} passed, 0 failed, 0 skipped`, async () => {
    const report = path.join(dir, 'report.json');
    const { code, out } = await runSuite({ LANGGRAPH_VALIDATION_DB_URL: db.url }, report);
    const summary = /Tests\s+(?:(\d+) failed \| )?(\d+) passed(?: \| (\d+) skipped)? \((\d+)\)/.exec(out);
    if (code !== 0 || !summary) console.log(out.slice(-6000));
    expect(code).toBe(0);
    // The console summary, "Tests  718 passed (718)", and the JSON report say the same.
    expect(summary).not.toBeNull();
    const [, failed, passed, skipped, total] = summary!;
    expect({ failed: Number(failed ?? 0), passed: Number(passed), skipped: Number(skipped ?? 0) }).toEqual({
      failed: 0,
      passed: EXPECTED_TESTS,
      skipped: 0,
    });
    expect(Number(total)).toBe(EXPECTED_TESTS);
    const json = JSON.parse(readFileSync(report, 'utf8')) as VitestReport;
    expect(json).toMatchObject({
      success: true,
      numTotalTests: EXPECTED_TESTS,
      numPassedTests: EXPECTED_TESTS,
      numFailedTests: 0,
      numPendingTests: 0,
      numTodoTests: 0,
    });
    const names = json.testResults.flatMap((f) => f.assertionResults.map((a) => a.fullName));
    // Every family of the suite ran, against this saver.
    for (const family of ['#put', '#putWrites', '#getTuple', '#list', '#deleteThread'])
      expect(names.some((n) => n.includes(`DurablePostgresSaver${family}`))).toBe(true);
    // Rows were really written to PostgreSQL (the last case's checkpointer leaves its rows behind).
    const [{ n }] = await db.query<{ n: number }>(`select count(*)::int as n from langgraph_checkpoints`);
    expect(n).toBeGreaterThan(0);
  }, 150_000);
});
