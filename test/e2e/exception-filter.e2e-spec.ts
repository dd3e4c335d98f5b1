import { Controller, Get, INestApplication, Param, Post, UseFilters } from '@nestjs/common';
import {
  CommandNotFoundError,
  DurableErrorCode,
  DurableExceptionFilter,
  DurableExecutionError,
  DurableUsageError,
  DurableWorkflow,
  IdempotencyConflictError,
  InvalidArgumentError,
  InvalidCommandStateError,
  InvalidOptionsError,
  InvalidRunStateError,
  LeaseLostError,
  PayloadTooLargeError,
  ResultTimeoutError,
  RunFailedError,
  RunNotFoundError,
  RunRepository,
  SerializationError,
} from '../../src';
import { StaleFenceError } from '../../src/fence';
import { bootHttpApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';

const ID = '00000000-0000-4000-8000-000000000000';

const ERRORS: Record<string, () => DurableExecutionError> = {
  'run-not-found': () => new RunNotFoundError(ID),
  'command-not-found': () => new CommandNotFoundError('key-1'),
  'invalid-run-state': () => new InvalidRunStateError(ID, 'succeeded', 'cancel'),
  'invalid-command-state': () => new InvalidCommandStateError('key-1', 'succeeded', 'approve'),
  'idempotency-conflict': () => new IdempotencyConflictError('key-1', ID, 'a', 'b'),
  'stale-fence': () => new StaleFenceError(ID, 1, 3),
  'invalid-argument': () => new InvalidArgumentError('limit', 'must be 1..500'),
  serialization: () => new SerializationError('input of run kind "x"', '$.n', 'a BigInt'),
  'invalid-options': () => new InvalidOptionsError(['worker.concurrency must be positive']),
  'payload-too-large': () => new PayloadTooLargeError('input of run kind "x"', 2_000_000, 1_000_000),
  'lease-lost': () => new LeaseLostError(ID, 3, 'step commit'),
  misuse: () => new DurableUsageError('ctx.progress() must be called inside a @DurableStep method'),
  'result-timeout': () => new ResultTimeoutError(ID, 30_000, 'running'),
  'run-failed': () =>
    new RunFailedError(ID, 'failed', { message: 'card 4242 4242 4242 4242 declined', code: 'E_DECLINED' }),
};

@Controller('throw')
@UseFilters(DurableExceptionFilter)
class ThrowingController {
  constructor(private readonly runs: RunRepository) {}

  @Get(':name')
  throwIt(@Param('name') name: string): never {
    throw ERRORS[name]();
  }

  @Get('plain/error')
  plain(): never {
    throw new Error('not ours');
  }

  /** Real errors of the library, through the filter. */
  @Post('cancel/:id')
  cancel(@Param('id') id: string) {
    return this.runs.cancel(id);
  }

  @Post('start/:kind/:key')
  start(@Param('kind') kind: string, @Param('key') key: string) {
    return this.runs.start(kind, { fixed: true }, { idempotencyKey: key });
  }
}

@DurableWorkflow('filter-a')
class AWorkflow {
  async run() {
    return null;
  }
}
@DurableWorkflow('filter-b')
class BWorkflow {
  async run() {
    return null;
  }
}

describe('DurableExceptionFilter', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let base: string;

  beforeAll(async () => {
    db = await createTestDatabase('filter');
    const booted = await bootHttpApp(db.url, {
      providers: [AWorkflow, BWorkflow],
      controllers: [ThrowingController],
      logger: false,
    });
    app = booted.app;
    base = `${booted.http}/throw`;
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it.each<[string, number, DurableErrorCode | undefined]>([
    ['run-not-found', 404, 'DURABLE_RUN_NOT_FOUND'],
    ['command-not-found', 404, 'DURABLE_COMMAND_NOT_FOUND'],
    ['invalid-run-state', 409, 'DURABLE_INVALID_RUN_STATE'],
    ['invalid-command-state', 409, 'DURABLE_INVALID_COMMAND_STATE'],
    ['idempotency-conflict', 409, 'DURABLE_IDEMPOTENCY_CONFLICT'],
    ['stale-fence', 409, 'DURABLE_STALE_FENCE'],
    ['invalid-argument', 400, 'DURABLE_INVALID_ARGUMENT'],
    ['serialization', 400, 'DURABLE_NOT_SERIALIZABLE'],
    ['invalid-options', 400, 'DURABLE_INVALID_OPTIONS'],
    ['payload-too-large', 413, 'DURABLE_PAYLOAD_TOO_LARGE'],
    ['lease-lost', 500, undefined],
    ['misuse', 500, undefined],
    ['result-timeout', 202, 'DURABLE_RESULT_TIMEOUT'],
    ['run-failed', 422, 'DURABLE_RUN_FAILED'],
  ])('%s → %i', async (name, status, code) => {
    const res = await fetch(`${base}/${name}`);
    expect(res.status).toBe(status);
    const body = await res.json();
    if (code === 'DURABLE_RUN_FAILED') {
      // The run's error message is run data: the answer has its status and error code only.
      expect(body).toEqual({
        statusCode: 422,
        code,
        message: `Run ${ID} ended failed (error code E_DECLINED): read it with RunRepository.get for its error.`,
      });
    } else if (code) {
      expect(body).toEqual({ statusCode: status, code, message: ERRORS[name]().message });
    } else {
      // A server fault: Nest's generic answer, nothing of the message.
      expect(body).toEqual({ statusCode: 500, message: 'Internal server error' });
    }
  });

  it('leaves errors that are not the library’s to Nest', async () => {
    const res = await fetch(`${base}/plain/error`);
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ statusCode: 500, message: 'Internal server error' });
  });

  it('maps errors the library really throws', async () => {
    const missing = await fetch(`${base}/cancel/${ID}`, { method: 'POST' });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ code: 'DURABLE_RUN_NOT_FOUND' });
    const badId = await fetch(`${base}/cancel/not-a-uuid`, { method: 'POST' });
    expect(badId.status).toBe(400);
    expect(await badId.json()).toMatchObject({ code: 'DURABLE_INVALID_ARGUMENT' });
    expect((await fetch(`${base}/start/filter-a/k1`, { method: 'POST' })).status).toBe(201);
    const conflict = await fetch(`${base}/start/filter-b/k1`, { method: 'POST' });
    expect(conflict.status).toBe(409);
    expect(await conflict.json()).toMatchObject({ code: 'DURABLE_IDEMPOTENCY_CONFLICT' });
  });
});
