import { INestApplication, Injectable } from '@nestjs/common';
import { DurableStep, DurableWorkflow, RunContext, RunRepository } from '../../src';
import { replayRuns } from '../../src/testing';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';

/**
 * Issue 36, section 4: the fields of a step's error class (`status`, `retryAfterMs`) reach the
 * workflow that catches it, on the first execution and on every replay alike (both get the error
 * rebuilt from its stored form). Only primitive fields are stored, keys that may hold credentials are
 * dropped, and nested objects (an axios error's `config`, `request`, `response`) never are.
 */
class RateLimitError extends Error {
  readonly status = 429;
  readonly retryAfterMs = 1500;
  readonly limited = true;
  readonly detail = 'x'.repeat(5000);
  constructor() {
    super('too many requests');
    this.name = 'RateLimitError';
  }
}

/** What an axios error holds: the request's headers, a circular request, the response. */
class FakeAxiosError extends Error {
  readonly isAxiosError = true;
  readonly status = 500;
  readonly code = 'ERR_BAD_RESPONSE';
  readonly config = { headers: { Authorization: 'Bearer secret' }, url: 'https://api.example/v1' };
  readonly request: Record<string, unknown>;
  readonly response = { status: 500, headers: { 'set-cookie': 'sid=secret' }, data: { oops: true } };
  readonly authorization = 'Bearer secret';
  readonly apiKey = 'secret-key';
  readonly requestId = 'req_123';
  constructor() {
    super('Request failed with status code 500');
    this.name = 'AxiosError';
    const request: Record<string, unknown> = { method: 'POST' };
    request.self = request;
    request.res = { req: request };
    this.request = request;
  }
}

/**
 * Each pass of the workflow through its catch, in order: the first execution's, then replays (the
 * signal's claim, and the e2e setup's replay check after each attempt).
 */
const seen: Record<string, unknown>[] = [];

/** At least one pass, and every one saw `expected`. */
function expectEvery(passes: Record<string, unknown>[], expected: Record<string, unknown>) {
  expect(passes.length).toBeGreaterThan(0);
  for (const pass of passes) expect(pass).toEqual(expected);
}

@Injectable()
class Tools {
  @DurableStep({ name: 'limited', retry: { maxAttempts: 1 } })
  async limited(): Promise<string> {
    throw new RateLimitError();
  }

  @DurableStep({ name: 'via_axios', retry: { maxAttempts: 1 } })
  async viaAxios(): Promise<string> {
    throw new FakeAxiosError();
  }
}

@DurableWorkflow('step-error-fields', { maxAttempts: 3 })
class FieldsWorkflow {
  constructor(private readonly tools: Tools) {}
  async run(input: { shape: 'limited' | 'axios' }, ctx: RunContext) {
    let out: Record<string, unknown>;
    try {
      if (input.shape === 'limited') await this.tools.limited();
      else await this.tools.viaAxios();
      out = { caught: false };
    } catch (e) {
      const err = e as Error & Record<string, unknown>;
      out = {
        name: err.name,
        code: err.code ?? null,
        status: err.status,
        retryAfterMs: err.retryAfterMs ?? null,
        limited: err.limited ?? null,
        detailLength: typeof err.detail === 'string' ? err.detail.length : null,
        requestId: err.requestId ?? null,
        isAxiosError: err.isAxiosError ?? null,
        leaked: ['config', 'request', 'response', 'authorization', 'apiKey'].filter((k) => k in err),
      };
    }
    seen.push({ shape: input.shape, ...out });
    // Parked here: the signal's claim replays the failed step from its record.
    await ctx.waitForSignal('go');
    return out;
  }
}

describe("a step error's own fields reach the workflow (issue 36, section 4)", () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;

  beforeAll(async () => {
    db = await createTestDatabase('step_error_fields');
    app = await bootApp(db.url, [Tools, FieldsWorkflow]);
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  /** Drives the run to its wait, then sends the signal and drives it to the end (a replay). */
  async function firstThenReplay(shape: 'limited' | 'axios') {
    seen.length = 0;
    const { run } = await runs.start(FieldsWorkflow, { shape });
    const parked = await driveUntil(app, db, run.id, ['waiting', 'succeeded', 'failed']);
    expect(parked.status).toBe('waiting');
    const first = seen.slice();
    await runs.signal(run.id, 'go', null);
    const ended = await driveUntil(app, db, run.id);
    expect(ended.status).toBe('succeeded');
    return { id: run.id, first, replayed: seen.slice(first.length), output: ended.output };
  }

  it('status and retryAfterMs of an Error subclass, the same on the first execution and the replay', async () => {
    const { first, replayed, output } = await firstThenReplay('limited');
    const expected = {
      name: 'RateLimitError',
      code: null,
      status: 429,
      retryAfterMs: 1500,
      limited: true,
      detailLength: 1000, // a string field is cut
      requestId: null,
      isAxiosError: null,
      leaked: [],
    };
    expect(output).toEqual(expected);
    expectEvery(first, { shape: 'limited', ...expected });
    expectEvery(replayed, { shape: 'limited', ...expected });
  });

  it('an axios-like error: status reaches the workflow, its headers, request and response are never stored', async () => {
    const { id, first, replayed, output } = await firstThenReplay('axios');
    const expected = {
      name: 'AxiosError',
      code: 'ERR_BAD_RESPONSE',
      status: 500,
      retryAfterMs: null,
      limited: null,
      detailLength: null,
      requestId: 'req_123',
      isAxiosError: true,
      leaked: [],
    };
    expect(output).toEqual(expected);
    expectEvery(first, { shape: 'axios', ...expected });
    expectEvery(replayed, { shape: 'axios', ...expected });

    const [checkpoint] = await db.query(
      `select output from ai_checkpoints where run_id = $1 and step_name = 'via_axios'`,
      [id],
    );
    // Only the primitive fields whose keys name no credentials (the string `code` is stored as `code`).
    expect(checkpoint.output.fields).toEqual({ status: 500, requestId: 'req_123', isAxiosError: true });
    expect(checkpoint.output.code).toBe('ERR_BAD_RESPONSE');
    const rows = await db.query(
      `select (select coalesce(jsonb_agg(c), '[]') from ai_checkpoints c where c.run_id = $1)::text as checkpoints,
              (select coalesce(jsonb_agg(e), '[]') from ai_events e where e.run_id = $1)::text as events,
              (select to_jsonb(r)::text from ai_runs r where r.id = $1) as run`,
      [id],
    );
    const stored = `${rows[0].checkpoints}${rows[0].events}${rows[0].run}`;
    expect(stored).toContain('ERR_BAD_RESPONSE'); // the error was stored
    expect(stored).not.toMatch(/secret/i);
    expect(stored).not.toMatch(/authorization/i);
    expect(stored).not.toContain('set-cookie');
  });

  it('every run replays as it ran', async () => {
    const results = await replayRuns(app, { kind: 'step-error-fields', limit: 10 });
    expect(results).toHaveLength(2);
    expect(results.filter((r) => r.problems.length)).toEqual([]);
  });
});
