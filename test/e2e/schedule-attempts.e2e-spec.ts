import { INestApplication } from '@nestjs/common';
import { DurableCron, DurableSchedules, DurableWorkflow } from '../../src';
import { fireSchedule } from '../../src/testing';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * Issue 36, part 2: a schedule's runs get the attempts their kind declares, whichever process fires the
 * tick. Before, the firing process gave them the attempts its own registry knew: the module's default
 * when it did not register the kind (an API pod, or a worker of other kinds, running the reconciler).
 */
@DurableCron('0 3 * * *', { name: 'sa-nightly' })
@DurableWorkflow('sa-report', { maxAttempts: 7 })
class Report {
  async run() {
    return 'ok';
  }
}

describe('a schedule keeps the attempts its kind declares (issue 36, part 2)', () => {
  let db: TestDatabase;
  let owner: INestApplication;
  let other: INestApplication;
  const attemptsOf = async (id: string) =>
    (await db.query(`select max_attempts from ai_runs where id = $1`, [id]))[0].max_attempts as number;

  beforeAll(async () => {
    db = await createTestDatabase('schedule_attempts');
    owner = await bootApp(db.url, [Report]); // registers the kind and declares its @DurableCron
    other = await bootApp(db.url, [], { defaultMaxAttempts: 2 }); // registers nothing
  });
  afterAll(async () => {
    await other?.close();
    await owner?.close();
    await db?.drop();
  });

  it("a @DurableCron's tick fired by a process that does not register the kind", async () => {
    await fireSchedule(owner, 'sa-nightly'); // declares it; its first tick, fired by the owner
    const [id] = await fireSchedule(other, 'sa-nightly');
    expect(await attemptsOf(id)).toBe(7);
  });

  it('a schedule created at run time where the kind is registered, fired elsewhere', async () => {
    await owner.get(DurableSchedules).create('sa-made', 'sa-report', '0 5 * * *');
    const [id] = await fireSchedule(other, 'sa-made');
    expect(await attemptsOf(id)).toBe(7);
  });

  it("created where the kind is not registered: the firing process's attempts, as before", async () => {
    await other.get(DurableSchedules).create('sa-blind', 'sa-report', '0 6 * * *');
    expect(await attemptsOf((await fireSchedule(other, 'sa-blind'))[0])).toBe(2);
    expect(await attemptsOf((await fireSchedule(owner, 'sa-blind'))[0])).toBe(7);
  });
});
