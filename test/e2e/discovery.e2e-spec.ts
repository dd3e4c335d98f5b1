import { Injectable } from '@nestjs/common';
import { DuplicateRegistrationError, DurableStep, DurableWorkflow, IdempotentCommand } from '../../src';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';

@DurableWorkflow('same-kind')
class FirstWorkflow {
  async run() {
    return 1;
  }
}

@DurableWorkflow('same-kind')
class SecondWorkflow {
  async run() {
    return 2;
  }
}

@Injectable()
class StepsA {
  @DurableStep({ name: 'shared.step' })
  async a() {
    return 1;
  }
}

@Injectable()
class StepsB {
  @DurableStep({ name: 'shared.step' })
  async b() {
    return 2;
  }
}

@Injectable()
class NoLookup {
  @IdempotentCommand({ name: 'refund', inDoubt: 'lookup' })
  async refund() {
    return 1;
  }
}

describe('discovery at bootstrap', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('discovery');
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('two workflows with one kind fail bootstrap naming both classes', async () => {
    const boot = bootApp(db.url, [FirstWorkflow, SecondWorkflow]);
    await expect(boot).rejects.toBeInstanceOf(DuplicateRegistrationError);
    await expect(bootApp(db.url, [FirstWorkflow, SecondWorkflow])).rejects.toThrow(
      /Workflow kind "same-kind" is declared twice: at FirstWorkflow and at SecondWorkflow/,
    );
  });

  it('a failed registration leaves no pool connecting behind it (the process could not exit)', async () => {
    const own = await createTestDatabase('discovery_pool');
    try {
      await expect(bootApp(own.url, [FirstWorkflow, SecondWorkflow])).rejects.toBeInstanceOf(
        DuplicateRegistrationError,
      );
      // A pool started beside the failing hook connects (and runs migrations) within this time.
      await new Promise((r) => setTimeout(r, 1500));
      const rows = await own.query<{ n: number; what: string | null }>(
        `select count(*)::int as n, string_agg(coalesce(application_name,$$?$$) || $$:$$ || coalesce(state,$$?$$) || $$:$$ || left(coalesce(query,$$$$),60), $$ | $$) as what from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()`,
        [own.name],
      );
      expect(rows[0]).toEqual({ n: 0, what: null });
    } finally {
      await own.drop();
    }
  });

  it('two steps with one name fail bootstrap naming both methods', async () => {
    await expect(bootApp(db.url, [StepsA, StepsB])).rejects.toThrow(
      /Step name "shared.step" is declared twice: at StepsA.a and at StepsB.b/,
    );
  });

  it("a command with inDoubt 'lookup' on a provider without lookupCommand fails bootstrap", async () => {
    await expect(bootApp(db.url, [NoLookup])).rejects.toThrow(
      /NoLookup must implement CommandLookup.lookupCommand/,
    );
  });
});
