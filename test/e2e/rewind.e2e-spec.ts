/**
 * Time travel in place (issue 49): a failed run goes back to a step under its own id, for systems that
 * know that id (RunRepository.fork with inPlace). Counted at loopback servers: what it recorded before
 * the step is not asked or sent again; what it runs again reaches the vendor under its next generation's
 * keys (`run_<id>:g1:…`), never under the keys it used before, whose effects stay once; what it set aside
 * is kept, marked (ai_rewound_checkpoints, `run.rewound`).
 */
import { INestApplication } from '@nestjs/common';
import { ForkRefusedError, InvalidArgumentError, InvalidRunStateError, RunRepository } from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { AgentV1, AgentV2, DoubtWorkflow, forkEnv, FORK_PROVIDERS } from '../fixtures/fork-agent-app';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';
import { FakeTarget, startFakeTarget } from '../helpers/fake-target';
import { ModelServer, startModelServer } from '../helpers/model-server';

describe('RunRepository.fork with inPlace (rewind)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  let model: ModelServer;
  let vendor: FakeTarget;

  beforeAll(async () => {
    db = await createTestDatabase('rewind');
    model = await startModelServer();
    vendor = await startFakeTarget({ honoursKeys: false }); // a key sent again would be a second effect
    forkEnv.modelUrl = model.url;
    forkEnv.vendorUrl = vendor.url;
    app = await bootApp(db.url, FORK_PROVIDERS);
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.get(DurableWorker).idle();
    await app?.close();
    await model?.close();
    await vendor?.close();
    await db?.drop();
  });

  it('a run that failed at step 7, rewound to step 3 with an edited step-2 result under the fixed version', async () => {
    const { run } = await runs.start(AgentV1, { task: 'refund order 41' });
    const id = run.id;
    expect((await driveUntil(app, db, id)).status).toBe('failed');
    const before = (await runs.checkpoints(id)).filter((c) => c.stepIndex >= 3);

    const rewound = await runs.fork(id, {
      fromStep: 3,
      version: 2,
      inPlace: true,
      editResult: { step: 2, value: { receipt: 'EDITED' } },
      by: 'ops',
    });
    expect(rewound.run).toMatchObject({ id, status: 'waiting', generation: 1, version: 2, error: null });
    expect(rewound.inherited).toBe(3);
    // What it recorded from step 3 on is set aside under the generation it ended, with the edited result's old row.
    const archived = await db.query(
      `select generation, step_index, step_name, output from ai_rewound_checkpoints where run_id = $1 order by step_index`,
      [id],
    );
    expect(archived.map((a) => a.step_index)).toEqual([2, 3, 4, 5, 6]);
    expect(archived.every((a) => a.generation === 0)).toBe(true);
    expect(archived.slice(1).map((a) => a.output)).toEqual(before.map((c) => c.output));
    expect((await runs.events(id)).find((e) => e.type === 'run.rewound')!.payload).toEqual({
      fromStep: 3,
      edited: 2,
      by: 'ops',
      generation: 1,
      archived: 5,
    });

    expect((await driveUntil(app, db, id)).status).toBe('succeeded');
    // Steps 1-2 never again; 3-9 again: turns 3, 5, 7, 9 asked (3 from the edited result) ...
    expect(model.asked.filter((a) => a.run === id).map((a) => a.step)).toEqual([1, 3, 5, 7, 3, 5, 7, 9]);
    expect(model.asked.filter((a) => a.run === id)[4].prompt).toBe('step 3 after EDITED');
    // ... and commands 4, 6, 8 sent under the new generation's keys; the old keys' effects stay once.
    const effects = vendor.effects();
    const mine = Object.keys(effects)
      .filter((k) => k.startsWith(`run_${id}:`))
      .sort();
    expect(mine).toEqual(
      [
        ...[2, 4, 6].map((s) => `run_${id}:step_${s}:act`),
        ...[4, 6, 8].map((s) => `run_${id}:g1:step_${s}:act`),
      ].sort(),
    );
    for (const k of mine) expect([k, effects[k]]).toEqual([k, 1]);
    const out = (await runs.result(id)) as { trail: string[] };
    expect(out.trail[1]).toBe('EDITED');
  });

  it('rewinds twice (generations 1 and 2) past commands the earlier generations sent, then forks it', async () => {
    const { run } = await runs.start(AgentV1, { task: 'refund order 43' });
    const id = run.id;
    expect((await driveUntil(app, db, id)).status).toBe('failed');
    // The same bug again from step 5: it fails at 7 again, under generation 1.
    await runs.fork(id, { fromStep: 5, inPlace: true });
    expect((await driveUntil(app, db, id)).status).toBe('failed');
    // Then the fix, from step 3: generation 2 replays 0-2, runs 3-9 past the rows of generations 0 and 1.
    const again = await runs.fork(id, { fromStep: 3, inPlace: true, version: 2 });
    expect(again.run.generation).toBe(2);
    expect((await driveUntil(app, db, id)).status).toBe('succeeded');
    const keys = Object.keys(vendor.effects()).filter((k) => k.startsWith(`run_${id}:`));
    expect(keys.sort()).toEqual(
      [
        ...[2, 4, 6].map((s) => `run_${id}:step_${s}:act`),
        `run_${id}:g1:step_6:act`,
        ...[4, 6, 8].map((s) => `run_${id}:g2:step_${s}:act`),
      ].sort(),
    );
    for (const k of keys) expect([k, vendor.effects()[k]]).toEqual([k, 1]);
    const archived = await db.query(
      `select generation, count(*)::int as n from ai_rewound_checkpoints where run_id = $1 group by 1 order by 1`,
      [id],
    );
    expect(archived).toEqual([
      { generation: 0, n: 2 },
      { generation: 1, n: 4 },
    ]);
    // A fork of it from step 9 inherits generation 2's record, not the rows it set aside.
    const fork = await runs.fork(id, { fromStep: 9 });
    expect((await driveUntil(app, db, fork.run.id)).status).toBe('succeeded');
    expect(model.asked.filter((a) => a.run === fork.run.id).map((a) => a.step)).toEqual([9]);
  });

  it('refuses what is not failed or dead-lettered, a command without an outcome, and fork-only options', async () => {
    const { run } = await runs.start(AgentV2, { task: 'refund order 42' });
    expect((await driveUntil(app, db, run.id)).status).toBe('succeeded');
    await expect(runs.fork(run.id, { fromStep: 3, inPlace: true })).rejects.toBeInstanceOf(
      InvalidRunStateError,
    );
    await expect(runs.fork(run.id, { fromStep: 3, inPlace: true, original: 'leave' })).rejects.toMatchObject({
      field: 'original',
    });
    await expect(runs.fork(run.id, { fromStep: 3, inPlace: 'yes' as never })).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );

    // A run that ended with a command in doubt at step 1: rewinding to step 1 would send it again.
    const { run: doubt } = await runs.start(DoubtWorkflow, { task: 'settle' });
    await driveUntil(app, db, doubt.id, ['waiting']);
    await db.query(`update ai_runs set status = 'failed', finished_at = now() where id = $1`, [doubt.id]);
    const err = await runs.fork(doubt.id, { fromStep: 1, inPlace: true }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ForkRefusedError);
    expect(err).toMatchObject({ reason: 'unsettled-command', commandKey: `run_${doubt.id}:step_1:settle` });
    expect((await runs.get(doubt.id))!).toMatchObject({ status: 'failed', generation: 0 });
  });
});
