import { INestApplication, Injectable } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Column, DataSource, Entity, PrimaryColumn } from 'typeorm';
import {
  DurableExecutionModule,
  DurableStep,
  DurableTransaction,
  DurableTransactionHost,
  DurableUsageError,
  DurableWorkflow,
  RunContext,
  RunRepository,
} from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { DurableDatabase } from '../../src/store/durable-database';
import { bootModules } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil, gate, replayFromRecord } from '../helpers/drive';
import { waitFor } from '../helpers/processes';
import { TRAIL } from '../helpers/event-trail';

/**
 * `@DurableTransaction` on the module's own database (issue 44): the body's writes and the step's
 * checkpoint commit in one transaction, fenced by the run's epoch. In one process, driven by hand;
 * the killed and frozen workers are in durable-transactions-crash.e2e-spec.ts.
 */

@Entity('tx_accounts')
class Account {
  @PrimaryColumn('text') id!: string;
  @Column('boolean', { default: false }) active!: boolean;
  @Column('int', { default: 0 }) activations!: number;
}

/** What the test steers: a failure on the next attempts, a gate the body waits at. */
const steer = {
  failFirst: 0,
  serializationFailures: 0,
  hold: null as null | { reached: () => void; promise: Promise<unknown> },
  attempts: 0,
};

@Injectable()
class Accounts {
  constructor(private readonly tx: DurableTransactionHost) {}

  @DurableTransaction()
  async activate(id: string) {
    steer.attempts++;
    const repo = this.tx.manager.getRepository(Account);
    await repo.save({ id, active: true, activations: 1 });
    if (steer.serializationFailures > 0) {
      steer.serializationFailures--;
      await this.tx.manager.query(`do $$ begin raise exception 'conflict' using errcode = '40001'; end $$`);
    }
    if (steer.failFirst > 0) {
      steer.failFirst--;
      throw new Error('the body failed after its write');
    }
    if (steer.hold) {
      steer.hold.reached();
      await steer.hold.promise;
    }
    return { id, active: true };
  }

  @DurableTransaction({ name: 'ledger' })
  async ledger(id: string, amount: number) {
    await this.tx.client.query(`insert into tx_ledger (account, amount) values ($1, $2)`, [id, amount]);
    const { rows } = await this.tx.client.query<{ n: number }>(
      `select count(*)::int as n from tx_ledger where account = $1`,
      [id],
    );
    return { seen: rows[0].n };
  }

  @DurableTransaction({ timeoutMs: 300, retry: { maxAttempts: 2, initialDelayMs: 10 } })
  async slow(id: string) {
    await this.tx.client.query(`insert into tx_ledger (account, amount) values ($1, 0)`, [id]);
    await this.tx.client.query(`select pg_sleep(5)`);
    return 'never';
  }

  @DurableTransaction({ retry: { maxAttempts: 1 } })
  async swallows(id: string) {
    await this.tx.client.query(`insert into tx_ledger (account, amount) values ($1, 0)`, [id]);
    await this.tx.client.query(`select 1/0`).catch(() => undefined); // the transaction is aborted now
    return 'looks fine';
  }

  @DurableStep()
  async plainStep(id: string) {
    return this.activate(id); // inside a step's body: a plain transaction, no checkpoint of its own
  }
}

@DurableWorkflow('tx-activate', { maxAttempts: 3 })
class ActivateWorkflow {
  constructor(private readonly accounts: Accounts) {}
  async run(input: { id: string }, _ctx: RunContext) {
    const a = await this.accounts.activate(input.id);
    const l = await this.accounts.ledger(input.id, 5);
    return { a, l };
  }
}

@DurableWorkflow('tx-parallel')
class ParallelWorkflow {
  constructor(private readonly accounts: Accounts) {}
  async run(input: { ids: string[] }) {
    // Un-awaited together, as users write fan-outs: each its own transaction and checkpoint.
    const all = await Promise.all(input.ids.map((id, i) => this.accounts.ledger(id, i)));
    const first = await Promise.race([this.accounts.ledger('race-a', 1), this.accounts.ledger('race-b', 2)]);
    return { all, first };
  }
}

@DurableWorkflow('tx-slow', { maxAttempts: 1 })
class SlowWorkflow {
  constructor(private readonly accounts: Accounts) {}
  async run(input: { id: string }) {
    return this.accounts.slow(input.id);
  }
}

@DurableWorkflow('tx-swallows', { maxAttempts: 1 })
class SwallowsWorkflow {
  constructor(private readonly accounts: Accounts) {}
  async run(input: { id: string }) {
    return this.accounts.swallows(input.id);
  }
}

describe('@DurableTransaction on the module database', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;

  beforeAll(async () => {
    db = await createTestDatabase('durable_tx');
    app = await bootModules({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url, entities: [Account], synchronize: true }),
        DurableExecutionModule.forRoot({
          database: { dataSourceName: 'default' },
          worker: { enabled: false, leaseTtlMs: 4000, heartbeatMs: 1000 },
          reconciler: { enabled: false },
          defaultRetry: { maxAttempts: 3, initialDelayMs: 10, maxDelayMs: 20 },
        }),
      ],
      providers: [Accounts, ActivateWorkflow, SlowWorkflow, SwallowsWorkflow, ParallelWorkflow],
    });
    await db.query(
      `create table tx_ledger (id serial primary key, account text not null, amount int not null)`,
    );
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });
  beforeEach(() => {
    Object.assign(steer, { failFirst: 0, serializationFailures: 0, hold: null, attempts: 0 });
  });

  const rowsOf = async (id: string) => ({
    accounts: (await db.query(`select activations from tx_accounts where id = $1`, [id])).length,
    ledger: (await db.query(`select 1 from tx_ledger where account = $1`, [id])).length,
  });

  it('commits the body and the checkpoint together (TypeORM manager and pg client); a replay runs neither again', async () => {
    const {
      run: { id },
    } = await runs.start('tx-activate', { id: 'a1' });
    const run = await driveUntil(app, db, id);
    expect(run.status).toBe('succeeded');
    expect(run.output).toEqual({ a: { id: 'a1', active: true }, l: { seen: 1 } });
    expect(await rowsOf('a1')).toEqual({ accounts: 1, ledger: 1 });
    const cps = await db.query(
      `select step_index, step_name, epoch from ai_checkpoints where run_id = $1 order by step_index`,
      [id],
    );
    expect(cps.map((c) => c.step_name)).toEqual(['Accounts.activate', 'ledger']);
    // Run it again from its record (retry of a finished run is refused; replay by a new claim instead):
    await replayFromRecord(db, id);
    steer.attempts = 0;
    const again = await driveUntil(app, db, id);
    expect(again.status).toBe('succeeded');
    expect(again.output).toEqual(run.output);
    expect(steer.attempts).toBe(0);
    expect(await rowsOf('a1')).toEqual({ accounts: 1, ledger: 1 });
  });

  it('a body that fails after its write rolls it back and is retried; a serialization failure too', async () => {
    steer.failFirst = 1;
    steer.serializationFailures = 1;
    const {
      run: { id },
    } = await runs.start('tx-activate', { id: 'a2' });
    const run = await driveUntil(app, db, id);
    expect(run.status).toBe('succeeded');
    expect(steer.attempts).toBe(3);
    expect(await rowsOf('a2')).toEqual({ accounts: 1, ledger: 1 });
  });

  it('retries spent: the run fails and nothing of the body is committed', async () => {
    steer.failFirst = 10;
    const {
      run: { id },
    } = await runs.start('tx-activate', { id: 'a3' }, { maxAttempts: 1 });
    const run = await driveUntil(app, db, id);
    expect(run.status).toBe('dead_lettered'); // the step's error ended run(): retryable, attempts spent
    expect(run.error?.message).toContain('the body failed after its write');
    expect(steer.attempts).toBe(3);
    expect(await rowsOf('a3')).toEqual({ accounts: 0, ledger: 0 });
  });

  it('a superseded epoch commits nothing: a takeover while the body runs rolls its writes back', async () => {
    const reached = gate();
    const release = gate();
    steer.hold = { reached: () => reached.open(), promise: release.promise };
    const {
      run: { id },
    } = await runs.start('tx-activate', { id: 'a4' });
    const w = app.get(DurableWorker);
    await w.tick();
    await reached.promise; // the body wrote its row, inside the transaction
    // Another worker claims the run: the epoch moves on (what a takeover's claim does).
    await db.query(`update ai_runs set epoch = epoch + 1, worker_id = 'someone-else' where id = $1`, [id]);
    release.open();
    await w.idle();
    expect(await rowsOf('a4')).toEqual({ accounts: 0, ledger: 0 });
    const cps = await db.query(`select 1 from ai_checkpoints where run_id = $1`, [id]);
    expect(cps).toHaveLength(0);
    const lost = await db.query(
      `select 1 from ${TRAIL} t where run_id = $1 and event_type = 'run.checkpoint_saved'`,
      [id],
    );
    expect(lost).toHaveLength(0);
  });

  it('transactions in Promise.all and a race: each commits once with its own checkpoint, and replays', async () => {
    const ids = ['p-1', 'p-2', 'p-3', 'p-4', 'p-5'];
    const {
      run: { id },
    } = await runs.start('tx-parallel', { ids });
    const run = await driveUntil(app, db, id);
    expect(run.status).toBe('succeeded');
    for (const account of [...ids, 'race-a', 'race-b']) expect((await rowsOf(account)).ledger).toBe(1);
    const cps = await db.query(`select count(*)::int as n from ai_checkpoints where run_id = $1`, [id]);
    expect(cps[0].n).toBe(7);
    // Replayed from its record by a new claim: the same output, no row written again.
    await replayFromRecord(db, id);
    expect((await driveUntil(app, db, id)).output).toEqual(run.output);
    for (const account of [...ids, 'race-a', 'race-b']) expect((await rowsOf(account)).ledger).toBe(1);
  });

  it('timeoutMs cancels the running statement, rolls back and retries; the connections come back', async () => {
    const pool = app.get(DurableDatabase).pool;
    const {
      run: { id },
    } = await runs.start('tx-slow', { id: 's1' });
    const started = Date.now();
    const run = await driveUntil(app, db, id);
    expect(run.status).toBe('dead_lettered'); // the step's error ended run(): retryable, attempts spent
    expect(run.error?.message).toMatch(/timed out|300 ms/);
    expect(Date.now() - started).toBeLessThan(4000); // not the 2 × 5 s of pg_sleep
    expect(await rowsOf('s1')).toEqual({ accounts: 0, ledger: 0 });
    await waitFor(
      async () =>
        (
          await db.query(
            `select count(*)::int as n from pg_stat_activity where datname = current_database() and query like '%pg_sleep(5)%' and state = 'active' and pid <> pg_backend_pid()`,
          )
        )[0].n === 0,
      3000,
      'the cancelled statements to end',
    );
    expect(pool.waitingCount).toBe(0);
  });

  it('a body that catches a failed statement and goes on: the step fails, nothing committed', async () => {
    const {
      run: { id },
    } = await runs.start('tx-swallows', { id: 'w1' });
    const run = await driveUntil(app, db, id);
    expect(run.status).toBe('failed'); // a programming error: failed at once, not retried
    expect(run.error?.code).toBe('DURABLE_MISUSE');
    expect(run.error?.message).toMatch(/caught the error and went on/);
    expect(await rowsOf('w1')).toEqual({ accounts: 0, ledger: 0 });
  });

  it('outside a run the method is a plain transaction; the host outside a body is a typed error', async () => {
    const accounts = app.get(Accounts);
    await expect(accounts.activate('p1')).resolves.toEqual({ id: 'p1', active: true });
    expect(await rowsOf('p1')).toEqual({ accounts: 1, ledger: 0 });
    steer.failFirst = 1;
    await expect(accounts.activate('p2')).rejects.toThrow('the body failed after its write');
    expect(await rowsOf('p2')).toEqual({ accounts: 0, ledger: 0 });
    const host = app.get(DurableTransactionHost);
    expect(host.active).toBe(false);
    expect(() => host.manager).toThrow(DurableUsageError);
    expect(() => host.client).toThrow(/outside a @DurableTransaction/);
    // The DataSource is the app's: the module reused it.
    expect(app.get(DurableDatabase).dataSource).toBe(app.get(DataSource));
  });
});

@Injectable()
class OtherAccounts {
  constructor(private readonly tx: DurableTransactionHost) {}
  static bodies = 0;

  @DurableTransaction({ name: 'other-activate', dataSource: 'app' })
  async activate(id: string) {
    OtherAccounts.bodies++;
    await this.tx.manager.getRepository(Account).save({ id, active: true, activations: 1 });
    return { id, db: (await this.tx.client.query('select current_database() as d')).rows[0].d as string };
  }

  @DurableTransaction({ name: 'same-activate', dataSource: 'same' })
  async activateSame(id: string) {
    await this.tx.client.query(`insert into tx_ledger (account, amount) values ($1, 1)`, [id]);
    return { id };
  }
}

@DurableWorkflow('tx-other')
class OtherWorkflow {
  constructor(private readonly accounts: OtherAccounts) {}
  async run(input: { id: string }) {
    return {
      other: await this.accounts.activate(input.id),
      same: await this.accounts.activateSame(input.id),
    };
  }
}

describe('@DurableTransaction on another database (a completion row and a fence row there)', () => {
  let db: TestDatabase;
  let appDb: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;

  beforeAll(async () => {
    db = await createTestDatabase('durable_tx_engine');
    appDb = await createTestDatabase('durable_tx_app');
    app = await bootModules({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url }),
        TypeOrmModule.forRoot({ name: 'same', type: 'postgres', url: db.url }),
        TypeOrmModule.forRoot({
          name: 'app',
          type: 'postgres',
          url: appDb.url,
          entities: [Account],
          synchronize: true,
        }),
        DurableExecutionModule.forRoot({
          database: { dataSourceName: 'default' },
          worker: { enabled: false },
          reconciler: { enabled: false },
          defaultRetry: { maxAttempts: 2, initialDelayMs: 10, maxDelayMs: 20 },
        }),
      ],
      providers: [OtherAccounts, OtherWorkflow],
    });
    await db.query(
      `create table tx_ledger (id serial primary key, account text not null, amount int not null)`,
    );
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
    await appDb?.drop();
  });

  it('commits the body with a completion row there, then the checkpoint; a DataSource on the same database is found the same', async () => {
    OtherAccounts.bodies = 0;
    const {
      run: { id },
    } = await runs.start('tx-other', { id: 'o1' });
    const run = await driveUntil(app, db, id);
    expect(run.status).toBe('succeeded');
    expect(run.output).toEqual({ other: { id: 'o1', db: appDb.name }, same: { id: 'o1' } });
    expect(await appDb.query(`select activations from tx_accounts where id = 'o1'`)).toEqual([
      { activations: 1 },
    ]);
    const done = await appDb.query(
      `select run_id, generation, step_index, step_name, output, epoch from durable_transactions`,
    );
    expect(done).toEqual([
      {
        run_id: id,
        generation: 0,
        step_index: 0,
        step_name: 'other-activate',
        output: (run.output as { other: unknown }).other,
        epoch: '1',
      },
    ]);
    expect(await appDb.query(`select run_id, epoch from durable_fences`)).toEqual([
      { run_id: id, epoch: '1' },
    ]);
    // 'same' reaches the module's database: no completion row for it, its checkpoint in its transaction.
    expect(await db.query(`select to_regclass('durable_transactions') as t`)).toEqual([{ t: null }]);
    expect(await db.query(`select count(*)::int as n from tx_ledger where account = 'o1'`)).toEqual([
      { n: 1 },
    ]);
    expect(OtherAccounts.bodies).toBe(1);
  });

  it('a completion row committed there with no checkpoint (a crash between the two) is read back, not run again', async () => {
    OtherAccounts.bodies = 0;
    const {
      run: { id },
    } = await runs.start('tx-other', { id: 'o2' });
    // As if an earlier claim committed the transaction there and died before its checkpoint.
    await appDb.query(`insert into tx_accounts (id, active, activations) values ('o2', true, 1)`);
    await appDb.query(
      `insert into durable_transactions (run_id, generation, step_index, step_name, fingerprint, output, epoch, timeline)
       values ($1, 0, 0, 'other-activate', null, '{"id":"o2","db":"earlier"}', 0, 1)`,
      [id],
    );
    const run = await driveUntil(app, db, id);
    expect(run.status).toBe('succeeded');
    expect((run.output as { other: unknown }).other).toEqual({ id: 'o2', db: 'earlier' });
    expect(OtherAccounts.bodies).toBe(0);
    expect(await appDb.query(`select activations from tx_accounts where id = 'o2'`)).toEqual([
      { activations: 1 },
    ]);
  });

  it('a superseded epoch commits nothing there: the fence row was raised by a newer claim', async () => {
    OtherAccounts.bodies = 0;
    const {
      run: { id },
    } = await runs.start('tx-other', { id: 'o3' });
    // A newer claim of the run (epoch 2) already wrote there; this worker's claim will be epoch 1.
    await appDb.query(`insert into durable_fences (run_id, timeline, epoch) values ($1, 1, 2)`, [id]);
    const worker = app.get(DurableWorker);
    await worker.tick();
    await worker.idle();
    expect(OtherAccounts.bodies).toBe(0);
    expect(await appDb.query(`select 1 from tx_accounts where id = 'o3'`)).toHaveLength(0);
    expect(await appDb.query(`select 1 from durable_transactions where run_id = $1`, [id])).toHaveLength(0);
    expect(await appDb.query(`select epoch from durable_fences where run_id = $1`, [id])).toEqual([
      { epoch: '2' },
    ]);
    expect(await db.query(`select 1 from ai_checkpoints where run_id = $1`, [id])).toHaveLength(0);
  });
});
