import { INestApplication, Injectable } from '@nestjs/common';
import {
  CommandContext,
  CommandLookup,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  RunRepository,
} from '../../src';
import { setPausePointHook } from '../../src/testing';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { DurableWorker } from '../../src/engine/worker.service';
import { Reconciler } from '../../src/maintenance/reconciler.service';
import { waitFor } from '../helpers/processes';
import { startTcpSwitch, TcpSwitch } from '../helpers/tcp-switch';
import { TRAIL } from '../helpers/event-trail';

/**
 * A fenced write whose connection to PostgreSQL is lost: the write may not have reached the server, or
 * it may have committed with its answer lost. Either way this claim cannot know what is stored, so the
 * workflow must not learn an outcome the record could contradict (a caught "Connection terminated"
 * taken for the step's failure, or a command's send taken for a failure): the claim ends and the run
 * is retried from what is stored. The app reaches the test database through a TCP switch that holds,
 * cuts or deafens its connections at a pause point.
 */
const bodies: string[] = [];
const target = { sends: [] as string[], applied: new Map<string, unknown>() };

@Injectable()
class Steps {
  @DurableStep({ name: 'lc_tool', kind: 'tool' })
  async tool(tag: string) {
    bodies.push(tag);
    return `done-${tag}`;
  }
  @DurableStep({ name: 'lc_after' })
  async after(got: string) {
    return `after ${got}`;
  }
}

@Injectable()
class Gateway implements CommandLookup {
  @IdempotentCommand({ name: 'lc_charge', inDoubt: 'lookup' })
  async charge(args: { amount: number }, ctx?: CommandContext) {
    target.sends.push(ctx!.idempotencyKey);
    const result = { charged: args.amount };
    target.applied.set(ctx!.idempotencyKey, result);
    return result;
  }
  async lookupCommand(_command: string, key: string) {
    return target.applied.has(key)
      ? { found: true as const, result: target.applied.get(key) }
      : { found: false as const };
  }
}

/** Written as users write it: the call in a try/catch, the workflow going on either way. */
@DurableWorkflow('lc-step')
class CaughtStep {
  constructor(private readonly steps: Steps) {}
  async run(input: { tag: string }) {
    let got: string;
    try {
      got = await this.steps.tool(input.tag);
    } catch (err) {
      got = `caught: ${(err as Error).message}`;
    }
    return { got, after: await this.steps.after(got) };
  }
}

@DurableWorkflow('lc-command')
class CaughtCommand {
  constructor(
    private readonly gw: Gateway,
    private readonly steps: Steps,
  ) {}
  async run(input: { amount: number }) {
    let got: string;
    try {
      got = JSON.stringify(await this.gw.charge(input));
    } catch (err) {
      got = `caught: ${(err as Error).message}`;
    }
    return { got, after: await this.steps.after(got) };
  }
}

describe('a write whose connection to PostgreSQL is lost', () => {
  let db: TestDatabase;
  let sw: TcpSwitch;
  let app: INestApplication;
  let runs: RunRepository;
  const serverPort = () => Number(new URL(db.url).port || 5432);

  beforeAll(async () => {
    db = await createTestDatabase('lost_connection');
    sw = await startTcpSwitch(serverPort());
    const url = new URL(db.url);
    url.port = String(sw.port);
    app = await bootApp(url.toString(), [Steps, Gateway, CaughtStep, CaughtCommand], {
      reconciler: { backoffBaseMs: 50, backoffMaxMs: 100 },
      // A claim whose own last write failed too (the connection still down) is recovered when its
      // lease ends: short here, so the test does not wait the default 30 s.
      worker: { leaseTtlMs: 1500, heartbeatMs: 300 },
    });
    runs = app.get(RunRepository);
  }, 30_000);

  afterEach(() => setPausePointHook(null));

  afterAll(async () => {
    await app?.close();
    await sw?.close();
    await db?.drop();
  });

  /**
   * Faults the run's first fenced write named `what`: `hold` keeps its bytes from the server, then cuts
   * the connection (the write never ran); `deafen` lets it commit and drops the answer, then cuts.
   */
  function faultFirst(
    runId: () => string,
    what: string,
    how: 'hold' | 'deafen',
    committed: () => Promise<boolean>,
  ) {
    let done = false;
    setPausePointHook(async (p) => {
      if (done || p.point !== 'before-write' || p.detail !== what || p.runId !== runId()) return;
      done = true;
      if (how === 'hold') {
        sw.pause();
        setTimeout(() => sw.switchTo(serverPort()), 300);
        return;
      }
      sw.deafen();
      // The write leaves once this hook returns; cut its connection once its commit is visible.
      void waitFor(committed, 10_000, `the ${what} write to commit`).then(() => sw.switchTo(serverPort()));
    });
    return () => done;
  }

  /** Ticks the worker and sweeps expired leases until the run ends. */
  async function drive(id: string) {
    await waitFor(
      async () => {
        await app.get(DurableWorker).tick();
        await app.get(DurableWorker).idle();
        await app.get(Reconciler).sweep();
        return ['succeeded', 'failed', 'dead_lettered'].includes((await runs.get(id))!.status);
      },
      15_000,
      `run ${id} to end`,
    );
    return (await runs.get(id))!;
  }

  const checkpointAt = (runId: string, name: string) => async () =>
    (await db.query(`select 1 from ai_checkpoints where run_id = $1 and step_name = $2`, [runId, name]))
      .length > 0;

  it.each(['hold', 'deafen'] as const)(
    'a step commit cut off (%s): the workflow never sees the lost connection, the run ends as if nothing happened',
    async (how) => {
      bodies.length = 0;
      let id = '';
      const hit = faultFirst(
        () => id,
        'run.checkpoint_saved',
        how,
        () => checkpointAt(id, 'lc_tool')(),
      );
      id = (await runs.start('lc-step', { tag: how })).run.id;
      const run = await drive(id);
      expect(hit()).toBe(true);
      expect(run.status).toBe('succeeded');
      expect(run.output).toEqual({ got: `done-${how}`, after: `after done-${how}` });
      // Held: the commit never ran, the step runs again (steps are at-least-once). Deafened: it
      // committed, the next claim replays it.
      expect(bodies).toEqual(how === 'hold' ? [how, how] : [how]);
      // The claim that lost its connection ended: retried by itself, or recovered when its lease ended.
      const [{ ended }] = await db.query(
        `select count(*)::int as ended from ${TRAIL} t
          where run_id = $1 and event_type in ('run.retry_scheduled', 'run.reconciled')`,
        [id],
      );
      expect(ended).toBe(1);
    },
    30_000,
  );

  it.each(['hold', 'deafen'] as const)(
    'a command whose outcome write is cut off (%s) after the send: not taken for a failure, sent once',
    async (how) => {
      target.sends.length = 0;
      let id = '';
      const recorded = async () =>
        (await db.query(`select 1 from ai_commands where run_id = $1 and status = 'succeeded'`, [id]))
          .length > 0;
      const hit = faultFirst(() => id, 'tool.command_succeeded', how, recorded);
      id = (await runs.start('lc-command', { amount: 7 })).run.id;
      const run = await drive(id);
      expect(hit()).toBe(true);
      expect(run.status).toBe('succeeded');
      expect(run.output).toEqual({ got: '{"charged":7}', after: 'after {"charged":7}' });
      expect(target.sends).toHaveLength(1);
    },
    30_000,
  );
});
