import { INestApplication, Injectable } from '@nestjs/common';
import {
  CheckpointService,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  NonRetryableError,
  RunContext,
  RunRepository,
} from '../../src';
import { cli } from '../../src/cli/main';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil, driveUntilHeld } from '../helpers/drive';

/**
 * What users read (issue 36, section 4): CheckpointService.list and the CLI's `show` list the user's
 * steps, the engine's entries only on request; a failed step reads `failed`, not `running`; a run held
 * on non-determinism says so in its view, in `show` and in `list`.
 */

const flags = { refuse: false, renamed: false };

@Injectable()
class ReadSteps {
  @DurableStep({ name: 'fetch_page' })
  async fetchPage(url: string) {
    return { url, bytes: 12 };
  }

  @DurableStep({ name: 'call_vendor', kind: 'tool' })
  async callVendor() {
    if (flags.refuse) throw new NonRetryableError('vendor refused');
    return 'ok';
  }

  @DurableStep({ name: 'summarize' })
  async summarize(n: number) {
    return `summary of ${n}`;
  }

  @DurableStep({ name: 'summarize_v2' })
  async summarizeV2(n: number) {
    return `summary v2 of ${n}`;
  }

  @IdempotentCommand({ name: 'notify', inDoubt: 'retry-with-key' })
  async notify(args: { to: string }) {
    return { sent: args.to };
  }
}

@DurableWorkflow('read-mixed')
class MixedWorkflow {
  constructor(private readonly steps: ReadSteps) {}
  async run(input: { url: string }, ctx: RunContext) {
    const page = await this.steps.fetchPage(input.url);
    ctx.now();
    ctx.uuid();
    const fast = ctx.patched('fast-path');
    await ctx.sleep(1);
    await this.steps.notify({ to: 'ops' });
    await ctx.emit('progress', { done: 1 });
    return { page, fast, summary: await this.steps.summarize(page.bytes) };
  }
}

@DurableWorkflow('read-fails')
class FailingWorkflow {
  constructor(private readonly steps: ReadSteps) {}
  async run(_input: unknown, ctx: RunContext) {
    await this.steps.fetchPage('a');
    ctx.now();
    return this.steps.callVendor();
  }
}

@DurableWorkflow('read-held')
class HeldWorkflow {
  constructor(private readonly steps: ReadSteps) {}
  async run(_input: unknown, ctx: RunContext) {
    const s = flags.renamed ? await this.steps.summarizeV2(1) : await this.steps.summarize(1);
    await ctx.waitForSignal('go');
    return s;
  }
}

let db: TestDatabase;
let app: INestApplication;
let runs: RunRepository;
let checkpoints: CheckpointService;

beforeAll(async () => {
  db = await createTestDatabase('usersread');
  app = await bootApp(db.url, [ReadSteps, MixedWorkflow, FailingWorkflow, HeldWorkflow], {
    worker: { workerId: 'read-worker' },
  });
  runs = app.get(RunRepository);
  checkpoints = app.get(CheckpointService);
});
afterAll(async () => {
  await app?.close();
  await db?.drop();
});

async function op(...args: string[]) {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const status = await cli(
    [...args, '--show-data'],
    { DATABASE_URL: db.url },
    (l) => stdout.push(l),
    (l) => stderr.push(l),
  );
  return { status, stdout: stdout.join('\n'), stderr: stderr.join('\n') };
}

/** The step rows `show` prints: `#  NAME  KIND  STATE` of each. */
const stepRows = (stdout: string) =>
  stdout
    .split('\n')
    .filter((l) => /^ {2}-?\d+ {2}/.test(l))
    .map((l) => l.trim().split(/\s+/).slice(0, 4).join(' '));

describe('what users read', () => {
  let mixed: string;
  beforeAll(async () => {
    mixed = (await runs.start('read-mixed', { url: 'https://example.com' })).run.id;
    expect(await driveUntil(app, db, mixed)).toMatchObject({ status: 'succeeded' });
  });

  it("CheckpointService.list lists the user's steps; includeEngine adds the engine's entries", async () => {
    const all = await checkpoints.list(mixed, { includeEngine: true });
    const names = all.map((c) => c.stepName);
    // Patch markers and the sleep's due time are at negative positions: first, from the oldest.
    expect(names.slice(0, 2).sort()).toEqual(['$due', '$patch:fast-path']);
    expect(names.slice(2)).toEqual([
      'fetch_page',
      '$now',
      '$uuid',
      '$sleep',
      'command:notify',
      '$emit:progress',
      'summarize',
    ]);
    expect((await checkpoints.list(mixed)).map((c) => c.stepName)).toEqual(['fetch_page', 'summarize']);
    // A page counts only what it returns: the second user step, not the engine entry after the first.
    const first = (await checkpoints.list(mixed, { limit: 1 }))[0];
    expect((await checkpoints.list(mixed, { after: first.stepIndex, limit: 1 }))[0].stepName).toBe(
      'summarize',
    );
    expect((await checkpoints.list(mixed, { newestFirst: true, limit: 1 }))[0].stepName).toBe('summarize');
    // `at` reads any position, an engine entry included.
    expect((await checkpoints.at(mixed, all[3].stepIndex))?.stepName).toBe('$now');
    await expect(checkpoints.list(mixed, { includeEngine: 'yes' as never })).rejects.toMatchObject({
      code: 'DURABLE_INVALID_ARGUMENT',
    });
  });

  it('CLI show hides the engine entries among the steps (saying how many); --all shows them', async () => {
    const res = await op('show', mixed);
    expect(res).toMatchObject({ status: 0, stderr: '' });
    expect(stepRows(res.stdout)).toEqual([
      expect.stringMatching(/^\d+ fetch_page compute done$/),
      expect.stringMatching(/^\d+ summarize compute done$/),
    ]);
    const all = (await checkpoints.list(mixed, { includeEngine: true })).length;
    expect(res.stdout).toContain(`steps (2, ${all - 2} engine entries hidden: --all shows them):`);
    expect(res.stdout).toMatch(/commands \(1\):\n.*\n {2}#\d+\s+notify\s+succeeded/);
    const full = await op('show', mixed, '--all');
    expect(stepRows(full.stdout)).toHaveLength(all);
    expect(full.stdout).toContain(`steps (${all}):`);
    expect(full.stdout).toMatch(/\$now\s+value\s+done/);
    const json = JSON.parse((await op('show', mixed, '--json')).stdout);
    expect(json.checkpoints.map((c: { stepName: string }) => c.stepName)).toEqual([
      'fetch_page',
      'summarize',
    ]);
  });

  it('CLI show on a failed run lists the failing step as failed, not running', async () => {
    flags.refuse = true;
    try {
      const id = (await runs.start('read-fails', {})).run.id;
      expect(await driveUntil(app, db, id)).toMatchObject({ status: 'failed' });
      const res = await op('show', id);
      expect(stepRows(res.stdout)).toEqual([
        expect.stringMatching(/^\d+ fetch_page compute done$/),
        expect.stringMatching(/^\d+ call_vendor tool failed$/),
      ]);
      expect(res.stdout).not.toMatch(/call_vendor.*running/);
    } finally {
      flags.refuse = false;
    }
  });

  it('a run held on non-determinism is held in its view, in show and in list', async () => {
    const id = (await runs.start('read-held', {})).run.id;
    const parked = await driveUntil(app, db, id, ['waiting']);
    expect(parked.held).toBe(false);
    flags.renamed = true;
    try {
      await runs.signal(id, 'go', null);
      const held = await driveUntilHeld(app, db, id);
      expect(held).toMatchObject({ status: 'waiting', held: true });
      expect(held.error?.message).not.toContain('was failed');
      const shown = await op('show', id);
      expect(shown.stdout).toMatch(new RegExp(`^run ${id}  kind read-held  status waiting \\(held\\)`));
      expect(shown.stdout).toContain('held on non-determinism: deploy code that replays it, then retry it');
      const listed = await op('list', '--kind', 'read-held');
      expect(listed.stdout).toMatch(new RegExp(`${id}\\s+read-held\\s+waiting \\(held\\)`));
      const page = JSON.parse((await op('list', '--kind', 'read-held', '--json')).stdout);
      expect(page.items[0]).toMatchObject({ id, held: true });
      await runs.retry(id);
      expect((await runs.get(id))!.held).toBe(false);
    } finally {
      flags.renamed = false;
    }
  });
});
