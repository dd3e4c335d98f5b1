import 'reflect-metadata';
import type { ModuleRef } from '@nestjs/core';
import { Client, Pool } from 'pg';
import { createTestDatabase, TestDatabase } from '../../test/helpers/database';
import { installFencedTransport } from '../engine/wire/fenced-transport';
import { inCall, testLease as lease } from '../../test/helpers/call-gate';
import { runStorage } from '../engine/run-storage';
import { resolveOptions } from '../options/resolve-options';
import { DurableBootState } from '../util/boot-state';
import { DurableDatabase } from './durable-database';
import { engineOwned } from './pg-wire-hook';

/**
 * The fenced transport for node-postgres, against a second database (as an app's own): a query made
 * inside a gated call is checked with that call's gate when pg submits it (queued behind another: when
 * the connection is free), never at the socket write, so a query is never checked against another
 * call's gate (pg-pool hands a freed client over inside the releaser's `release()`). A refused query
 * is not written: the connection is destroyed. The engine's own statements are never checked.
 */
describe('fenced transport: pg', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    installFencedTransport();
    db = await createTestDatabase('pg_wire');
    await db.query('create table effects (key text primary key)');
  });
  afterAll(async () => {
    await db.drop();
  });
  beforeEach(async () => {
    await db.query('truncate effects');
  });

  /** Runs `fn` outside any call (another run's code, a controller), from inside one. */
  const runOutside = <T>(fn: () => T): T => runStorage.exit(fn);
  const keys = async () =>
    (await db.query<{ key: string }>('select key from effects order by key')).map((r) => r.key);
  const insert = 'insert into effects values ($1)';
  const client = async () => {
    const c = new Client({ connectionString: db.url });
    c.on('error', () => undefined);
    await c.connect();
    return c;
  };

  it('a query leaves while the gate holds; a refused one is not written and ends the connection', async () => {
    const c = await client();
    const g = lease();
    await inCall(g, () => c.query(insert, ['a']));
    g.refuse = true;
    await expect(inCall(g, () => c.query(insert, ['b']))).rejects.toThrow('lease lost (test)');
    await expect(c.query('select 1')).rejects.toThrow(); // the connection is gone
    expect(await keys()).toEqual(['a']);
    expect(g.checks).toBe(2);
    await c.end().catch(() => undefined);
  });

  it("a query queued behind another is checked when submitted, with its own call's gate", async () => {
    const c = await client();
    try {
      const first = lease();
      const second = lease();
      const slow = inCall(first, () => c.query('select pg_sleep(0.3)'));
      const queued = inCall(second, () => c.query(insert, ['queued'])).then(
        () => 'sent',
        (e: Error) => e.message,
      );
      await new Promise((r) => setTimeout(r, 100));
      second.refuse = true; // lost while its query waits behind the first
      await slow;
      expect(await queued).toContain('lease lost (test)');
      expect(await keys()).toEqual([]);
      expect(first.checks).toBe(1); // the queued query, written from the first's readyForQuery, never checked it
      expect(second.checks).toBe(1);
    } finally {
      await c.end().catch(() => undefined);
    }
  });

  it("a query queued from outside a call behind a refused call's query is not checked by it", async () => {
    // The connection is made inside the call: pg's socket events (readyForQuery, which writes the next
    // query) run in the call's async context, and a check at the socket write would take its gate.
    const g = lease();
    let c!: Client;
    let outside!: Promise<unknown>;
    await inCall(g, async () => {
      c = await client();
      const slow = c.query('select pg_sleep(0.3)');
      outside = new Promise((r) => setImmediate(r)).then(() =>
        runOutside(() => c.query(insert, ['outside'])),
      );
      await new Promise((r) => setTimeout(r, 100));
      g.refuse = true; // the call's lease is lost while both are queued (it still runs)
      await slow;
      await outside;
    });
    try {
      expect(await keys()).toEqual(['outside']);
      expect(g.checks).toBe(1);
    } finally {
      await c.end();
    }
  });

  it("a pooled client released by a refused call to a waiter outside calls: the waiter's query is its own", async () => {
    const pool = new Pool({ connectionString: db.url, max: 1 });
    pool.on('error', () => undefined);
    try {
      const g = lease();
      let release!: () => void;
      const held = inCall(g, async () => {
        const c = await pool.connect();
        await new Promise<void>((r) => (release = r));
        g.refuse = true; // the releasing call's lease is lost
        c.release(); // hands the client to the waiter, inside this call's context
      });
      await new Promise((r) => setTimeout(r, 100));
      const waiter = pool.query(insert, ['waiter']); // queued: the pool's one client is held
      release();
      await held;
      await waiter;
      expect(await keys()).toEqual(['waiter']);
      expect(g.checks).toBe(0);
    } finally {
      await pool.end();
    }
  });

  it("a pooled client released outside calls to a waiting call: the waiter's query is checked with its gate", async () => {
    const pool = new Pool({ connectionString: db.url, max: 1 });
    pool.on('error', () => undefined);
    try {
      const c = await pool.connect();
      const g = lease();
      const waiter = inCall(g, () => pool.query(insert, ['waiter'])).then(
        () => 'sent',
        (e: Error) => e.message,
      );
      await new Promise((r) => setTimeout(r, 100));
      g.refuse = true;
      c.release();
      expect(await waiter).toContain('lease lost (test)');
      expect(await keys()).toEqual([]);
      expect(g.checks).toBe(1);
    } finally {
      await pool.end();
    }
  });

  it("the engine's own statements (DurableDatabase.query) and LISTEN connections are never checked by a call's gate", async () => {
    const options = resolveOptions({ database: { url: db.url, poolSize: 1 } });
    const engine = new DurableDatabase(options, {} as ModuleRef, new DurableBootState());
    await engine.onModuleInit();
    const listen = await client();
    engineOwned(listen);
    try {
      const g = lease(true);
      await inCall(g, async () => {
        // The pool's one connection is busy with a statement of the engine's: the next one queues.
        await Promise.all([
          engine.query('select pg_sleep(0.1)'),
          engine.query(insert, ['engine']),
          listen.query('listen some_channel'),
        ]);
      });
      expect(await keys()).toEqual(['engine']);
      expect(g.checks).toBe(0);
    } finally {
      await listen.end();
      await engine.onApplicationShutdown();
    }
  });
});
