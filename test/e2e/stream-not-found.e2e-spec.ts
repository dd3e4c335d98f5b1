import { Controller, Headers, INestApplication, Logger, Param, Sse, UseFilters } from '@nestjs/common';
import { request } from 'node:http';
import {
  DurableExceptionFilter,
  DurableWorkflow,
  RunContext,
  runEventStream,
  RunRepository,
} from '../../src';
import { bootHttpApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * Issue 36, part 5 (security review): a user SSE route built on `runEventStream` answers an unknown run
 * with a 404 (and a bad run id or Last-Event-ID with a 400) before streaming, not a 200 followed by an
 * `event: error` and a logged stack.
 */

@DurableWorkflow('sse-known')
class Known {
  async run(_input: unknown, ctx: RunContext) {
    await ctx.emit('phase', { name: 'only' });
    return 1;
  }
}

@Controller('runs')
@UseFilters(DurableExceptionFilter)
class UserStreamController {
  constructor(private readonly runs: RunRepository) {}
  @Sse(':id/stream')
  stream(@Param('id') id: string, @Headers('last-event-id') last?: string) {
    return runEventStream(this.runs, id, { lastEventId: last, pollMs: 200 });
  }
}

let db: TestDatabase;
let app: INestApplication;
let http: string;

beforeAll(async () => {
  db = await createTestDatabase('sse_404');
  ({ app, http } = await bootHttpApp(db.url, { providers: [Known], controllers: [UserStreamController] }));
});
afterAll(async () => {
  await app?.close();
  await db?.drop();
});

/** Status, content type and the whole body of a GET (the stream of a known, ended run ends by itself). */
function get(path: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
    request(`${http}${path}`, { headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () =>
        resolve({ status: res.statusCode!, type: String(res.headers['content-type']), body }),
      );
    })
      .on('error', reject)
      .end();
  });
}

describe('runEventStream before streaming', () => {
  it('an unknown run is a 404 JSON answer (no stream, nothing logged); bad ids and Last-Event-ID are 400', async () => {
    const error = jest.spyOn(Logger.prototype, 'error');
    try {
      const missing = await get('/runs/00000000-0000-4000-8000-000000000000/stream');
      expect(missing.status).toBe(404);
      expect(missing.type).toMatch(/^application\/json/);
      expect(JSON.parse(missing.body)).toMatchObject({ statusCode: 404, code: 'DURABLE_RUN_NOT_FOUND' });
      expect(missing.body).not.toContain('event: error');

      const notUuid = await get('/runs/not-a-uuid/stream');
      expect(notUuid.status).toBe(400);
      expect(JSON.parse(notUuid.body)).toMatchObject({ code: 'DURABLE_INVALID_ARGUMENT' });
      const runId = (await app.get(RunRepository).start('sse-known', {})).run.id;
      const badResume = await get(`/runs/${runId}/stream`, { 'last-event-id': '1e9' });
      expect(badResume.status).toBe(400);
      expect(JSON.parse(badResume.body).message).toContain('Last-Event-ID');
      expect(error).not.toHaveBeenCalled();
    } finally {
      error.mockRestore();
    }
  });

  it('a known run streams as before: 200 text/event-stream, its entries, then end', async () => {
    const runs = app.get(RunRepository);
    const { run } = await runs.start('sse-known', {});
    await runs.cancel(run.id, 'ended before it ran');
    const ok = await get(`/runs/${run.id}/stream`);
    expect(ok.status).toBe(200);
    expect(ok.type).toMatch(/^text\/event-stream/);
    expect(ok.body).toContain('event: end');
    expect(ok.body).toContain('"status":"cancelled"');
  });
});
