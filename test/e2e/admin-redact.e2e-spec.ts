import { INestApplication, Injectable } from '@nestjs/common';
import {
  CommandFailedError,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  NonRetryableError,
  RedactHook,
  RunContext,
  RunRepository,
} from '../../src';
import { DurableAdminModule } from '../../src/admin';
import { bootHttpApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';

/**
 * One `redact` hook on every surface that shows run data: a secret placed in a run's input, a step
 * output, a command's args, result and error, a signal payload, a cancel reason, an error message and a
 * parked reason is on no admin API response and no inspector page of an app with a hook that hides it,
 * and is on them in an app without one (same database: the stored data stays intact).
 */
const SECRET = 'sk_live_TOPSECRET_4242';

/** The secret, or the mark a pass of the hook left (an event payload is redacted when stored and when shown). */
const SECRET_OR_MARK = new RegExp(`${SECRET}|\\[hidden:[a-z._]+\\]`, 'g');

/** Puts `mark` in place of the secret (or an earlier mark) in every string of a value, deeply. */
const hide = (v: unknown, mark: string): unknown => {
  if (typeof v === 'string') return v.replace(SECRET_OR_MARK, mark);
  if (Array.isArray(v)) return v.map((x) => hide(x, mark));
  if (v && typeof v === 'object' && !(v instanceof Date)) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, hide(x, mark)]));
  }
  return v;
};

/** Hides the secret behind a mark that names the key the hook was given, so each surface shows its key. */
const redact: RedactHook = (key, value) => hide(value, `[hidden:${key}]`);

@Injectable()
class SecretSteps {
  @DurableStep({ name: 'echo' })
  async echo(secret: string) {
    return { echo: secret };
  }

  /** A model step: its `usage` and `requestId` land in the checkpoint's meta as well. */
  @DurableStep({ name: 'think', kind: 'model' })
  async think(secret: string) {
    return { text: 'ok', usage: { promptTokens: 3, note: secret }, requestId: `req-${secret}` };
  }
}

@Injectable()
class SecretCommands {
  @IdempotentCommand({ name: 'ship', inDoubt: 'manual' })
  async ship(args: { note: string }) {
    return { receipt: args.note };
  }

  @IdempotentCommand({ name: 'refuse', inDoubt: 'manual' })
  async refuse(args: { note: string }): Promise<never> {
    throw new NonRetryableError(`refused ${args.note}`);
  }
}

@DurableWorkflow('secretive', { maxAttempts: 1 })
class SecretiveWorkflow {
  constructor(
    private readonly steps: SecretSteps,
    private readonly commands: SecretCommands,
  ) {}
  async run(input: { secret: string }, ctx: RunContext) {
    await this.steps.echo(input.secret);
    await ctx.emit('note', { secret: input.secret });
    await this.steps.think(input.secret);
    await this.commands.ship({ note: input.secret });
    try {
      await this.commands.refuse({ note: input.secret });
    } catch (err) {
      if (!(err instanceof CommandFailedError)) throw err;
    }
    await ctx.waitForSignal('go');
    throw new Error(`boom ${input.secret}`);
  }
}

@DurableWorkflow('idle')
class IdleWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    return ctx.waitForSignal('never');
  }
}

async function boot(url: string, withHook: boolean): Promise<{ app: INestApplication; http: string }> {
  const { app, http } = await bootHttpApp(url, {
    options: withHook ? { redact } : {},
    imports: [DurableAdminModule.forRoot({ path: 'durable', allowAnonymous: true, observability: false })],
    providers: [SecretSteps, SecretCommands, SecretiveWorkflow, IdleWorkflow],
  });
  return { app, http: `${http}/durable` };
}

describe('redact hook on every admin surface', () => {
  let db: TestDatabase;
  let plain: { app: INestApplication; http: string };
  let hidden: { app: INestApplication; http: string };
  let secretRun: string;
  let cancelledRun: string;
  const actionResponses: string[] = [];

  const post = async (base: string, path: string, body: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    return res.text();
  };
  /** Every read surface of the admin module: API responses and inspector pages, as text. */
  const everything = async (base: string): Promise<Record<string, string>> => {
    const paths = [
      '/api/runs',
      '/api/runs?status=dead_lettered',
      '/api/runs?status=cancelled',
      '/api/stats',
      `/api/runs/${secretRun}`,
      `/api/runs/${cancelledRun}`,
      `/api/runs/${secretRun}/stream`,
      '',
      '?status=dead_lettered',
      `/runs/${secretRun}`,
      `/runs/${cancelledRun}`,
    ];
    const out: Record<string, string> = {};
    for (const p of paths) {
      const res = await fetch(`${base}${p}`);
      expect(res.status).toBe(200);
      out[p || '/'] = await res.text();
    }
    return out;
  };

  beforeAll(async () => {
    db = await createTestDatabase('admin_redact');
    plain = await boot(db.url, false);
    hidden = await boot(db.url, true);
    const runs = plain.app.get(RunRepository);
    secretRun = (
      await runs.start(
        'secretive',
        { secret: SECRET },
        { idempotencyKey: `order-${SECRET}`, tags: { note: SECRET } },
      )
    ).run.id;
    await driveUntil(plain.app, db, secretRun, ['waiting']);
    // Operator actions go through the app with the hook: their responses are surfaces too.
    actionResponses.push(
      await post(hidden.http, `/api/runs/${secretRun}/signal`, { name: 'go', payload: { s: SECRET } }),
    );
    expect((await driveUntil(plain.app, db, secretRun)).status).toBe('dead_lettered');
    cancelledRun = (await runs.start('idle', {})).run.id;
    actionResponses.push(
      await post(hidden.http, `/api/runs/${cancelledRun}/cancel`, { reason: `stop ${SECRET}` }),
    );
  });
  afterAll(async () => {
    await hidden?.app.close();
    await plain?.app.close();
    await db?.drop();
  });

  it('without the hook, the secret is on every kind of surface (so the check below can fail)', async () => {
    const detail = JSON.parse((await everything(plain.http))[`/api/runs/${secretRun}`]);
    expect(detail.run.input).toEqual({ secret: SECRET });
    expect(detail.run.error.message).toBe(`boom ${SECRET}`);
    expect(detail.run.parkedReason).toContain(SECRET);
    const outputs = JSON.stringify(detail.checkpoints.map((c: { output: unknown }) => c.output));
    expect(outputs).toContain(`{"echo":"${SECRET}"}`);
    expect(outputs).toContain(`{"payload":{"s":"${SECRET}"}}`);
    const metas = JSON.stringify(detail.checkpoints.map((c: { meta: unknown }) => c.meta));
    expect(metas).toContain(`req-${SECRET}`);
    expect(detail.run.idempotencyKey).toBe(`order-${SECRET}`);
    const [ship, refuse] = detail.commands;
    expect(ship.payload).toEqual({ note: SECRET });
    expect(ship.result).toEqual({ receipt: SECRET });
    expect(JSON.stringify(refuse.error)).toContain(SECRET);
    const cancelled = JSON.parse((await everything(plain.http))[`/api/runs/${cancelledRun}`]);
    expect(cancelled.run.cancelReason).toBe(`stop ${SECRET}`);
    const stream = (await everything(plain.http))[`/api/runs/${secretRun}/stream`];
    expect(stream).toContain(`"data":{"secret":"${SECRET}"}`);
    expect(stream).toContain('event: end');
    const pages = await everything(plain.http);
    for (const p of ['/', `/runs/${secretRun}`, `/runs/${cancelledRun}`, '/api/runs']) {
      expect({ p, has: pages[p].includes(SECRET) }).toEqual({ p, has: true });
    }
  });

  it('with the hook, the secret is on no admin API response and no inspector page', async () => {
    const pages = await everything(hidden.http);
    for (const [p, text] of Object.entries(pages)) {
      expect({ p, leaked: text.includes(SECRET) }).toEqual({ p, leaked: false });
    }
    for (const text of actionResponses) expect(text).not.toContain(SECRET);
    expect(pages[`/runs/${secretRun}`]).toContain('[hidden:');
    // Each surface shows the secret hidden under its own key.
    const detail = JSON.parse(pages[`/api/runs/${secretRun}`]);
    expect(detail.run.input).toEqual({ secret: '[hidden:run.input]' });
    expect(detail.run.error.message).toBe('boom [hidden:run.error]');
    expect(detail.run.parkedReason).toContain('[hidden:run.parked_reason]');
    const outputs = JSON.stringify(detail.checkpoints.map((c: { output: unknown }) => c.output));
    expect(outputs).toContain('{"echo":"[hidden:checkpoint.output]"}');
    const metas = JSON.stringify(detail.checkpoints.map((c: { meta: unknown }) => c.meta));
    expect(metas).toContain('req-[hidden:checkpoint.meta]');
    expect(detail.run.idempotencyKey).toBe('order-[hidden:run.idempotency_key]');
    expect(detail.run.tags).toEqual({ note: '[hidden:run.tags]' });
    expect(outputs).toContain('{"payload":{"s":"[hidden:signal.payload]"}}');
    expect(pages[`/api/runs/${secretRun}/stream`]).toContain('"data":{"secret":"[hidden:stream.data]"}');
    const [ship, refuse] = detail.commands;
    expect(ship.payload).toEqual({ note: '[hidden:command.args]' });
    expect(ship.result).toEqual({ receipt: '[hidden:command.result]' });
    expect(JSON.stringify(refuse.error)).toContain('[hidden:command.error]');
    const event = (view: { events: Array<{ type: string; payload: unknown }> }, type: string) =>
      JSON.stringify(view.events.find((e) => e.type === type)?.payload);
    expect(event(detail, 'run.dead_lettered')).toContain('[hidden:run.dead_lettered]');
    const cancelled = JSON.parse(pages[`/api/runs/${cancelledRun}`]);
    expect(cancelled.run.cancelReason).toBe('stop [hidden:run.cancel_reason]');
    // Stored redacted (as run.cancel) by the app with the hook, and redacted again when shown.
    expect(event(cancelled, 'run.cancelled')).toContain('stop [hidden:run.cancelled]');
  });

  it('stores the data intact and RunRepository reads it unredacted, even in the app with the hook', async () => {
    const runs = hidden.app.get(RunRepository);
    expect((await runs.get(secretRun))!.input).toEqual({ secret: SECRET });
    expect((await runs.get(cancelledRun))!.cancelReason).toBe(`stop ${SECRET}`);
    const out = (await runs.checkpoints(secretRun)).map((c) => c.output);
    expect(JSON.stringify(out)).toContain(SECRET);
  });
});
