import { INestApplication, Injectable } from '@nestjs/common';
import { DurableStep, DurableWorkflow, RunRepository } from '../../src';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil, replayFromRecord } from '../helpers/drive';

/**
 * A step that returns nothing gives `undefined` back, on its first execution and on every replay (issue
 * 45 part 5): it is stored as null with an `undefined` mark in its checkpoint's meta. Before, it read
 * back as null, so `=== undefined` branched differently on replay than it had the first time.
 */
let bodies = 0;

@Injectable()
class VoidSteps {
  @DurableStep({ name: 'nothing' })
  async nothing(): Promise<void> {
    bodies++;
  }

  @DurableStep({ name: 'null' })
  async nullish(): Promise<null> {
    bodies++;
    return null;
  }
}

@DurableWorkflow('void-results')
class VoidResults {
  constructor(private readonly steps: VoidSteps) {}
  async run() {
    const a = await this.steps.nothing(); // committed alone (a step follows)
    const b = await this.steps.nullish();
    const c = await this.steps.nothing(); // the last step: its commit rides on the finish
    return { a: a === undefined, b: b === null, c: c === undefined };
  }
}

describe('undefined step results', () => {
  let db: TestDatabase;
  let app: INestApplication;
  beforeAll(async () => {
    db = await createTestDatabase('undefined_results');
    app = await bootApp(db.url, [VoidSteps, VoidResults]);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('round-trip as undefined (null stays null), first execution and replay', async () => {
    const { run } = await app.get(RunRepository).start('void-results', {});
    const first = await driveUntil(app, db, run.id);
    expect(first.output).toEqual({ a: true, b: true, c: true });
    expect(bodies).toBe(3);
    const marks = await db.query(
      `select step_index, output, meta from ai_checkpoints where run_id = $1 order by step_index`,
      [run.id],
    );
    expect(marks.map((m) => m.meta?.undefined ?? false)).toEqual([true, false, true]);
    // A new claim replays the record: nothing runs again, and the same branches are taken.
    await replayFromRecord(db, run.id);
    const again = await driveUntil(app, db, run.id);
    expect(again.output).toEqual({ a: true, b: true, c: true });
    expect(bodies).toBe(3);
  });
});
