import * as pg from 'pg';
import { exemptFromWireCheck } from '../util/wire-exempt';

/**
 * The fenced transport for node-postgres (`pg`, and what is built on it: TypeORM, Knex, Prisma's pg
 * adapter, a second database of the app's): a query made inside a gated call is checked, with that
 * call's gate, when pg actually submits it to the connection. pg writes a query queued behind another
 * from the socket's `readyForQuery`, in whatever async context created the socket, and pg-pool hands
 * a freed client to the next waiter inside the releaser's `release()`: the async context at the
 * socket write is not the query's, so the socket check leaves pg's sockets alone and this checks
 * queries instead.
 *
 * - `Client.prototype.query` captures the live call's gate and tags the query it queues (pg pushes it
 *   and calls `_pulseQueryQueue` synchronously); the query's own `submit` is wrapped: the gate is
 *   checked right before pg writes the query's messages (parse, bind, execute, sync: several writes).
 *   A refused query is not written: the connection's socket is destroyed with the lease error (never
 *   a message dropped from the middle of the protocol), which fails that query and every query
 *   queued on the client with it, as a lost connection does; a pool drops the client.
 * - `Pool.prototype.connect` (pg-pool) runs a callback in the caller's call (the engine's run storage
 *   as the caller had it), not in that of the `release()` that handed it the client: `pool.query` from a non-gated context is never checked
 *   against the gate of the call that released the client, and a gated caller's query is its own.
 * - Connections the engine owns (LISTEN, `engineOwned`) and statements it runs (`outsideCalls`) are
 *   never checked: a failed check halts a run, and the engine's heartbeat must never be refused by a
 *   user's call.
 * @internal
 */

/** What the hook needs from the engine (the store cannot import it). */
export interface PgWireScope {
  /** The gate of the live call this code runs in, if any. */
  currentGate(): { check(target: string): Error | undefined } | undefined;
  /** Runs `fn` outside any call (the engine's run storage set to nothing). */
  exit<T>(fn: () => T): T;
  /** The call this code runs in (or none), as a runner that puts `fn` back in it. */
  capture(): <T>(fn: () => T) => T;
}

type Gate = NonNullable<ReturnType<PgWireScope['currentGate']>>;

const GATE = Symbol('durable.pgGate');
const CAPTURED = Symbol('durable.pgCaptured');
const GATED = Symbol('durable.pgGatedSubmit');

type Submit = ((connection: PgConnection) => unknown) & { [GATED]?: true };
interface PgQuery {
  submit: Submit;
  [GATE]?: Gate;
}
interface PgConnection {
  stream?: { destroy(err?: Error): void };
}
interface PgClient {
  connection?: PgConnection;
  connectionParameters?: { host?: string; port?: number; database?: string };
  _queryQueue?: PgQuery[];
  [CAPTURED]?: Gate;
}

let scope: PgWireScope | undefined;
const engineClients = new WeakSet<object>();

/**
 * Runs `fn` (an engine statement) outside any user call: its queries never carry a call's gate. Before
 * the hook is installed, just runs it. @internal
 */
export function outsideCalls<T>(fn: () => T): T {
  return scope ? scope.exit(fn) : fn();
}

/** Marks a client the engine owns (a LISTEN connection): its queries are never checked. @internal */
export function engineOwned(client: object): void {
  engineClients.add(client);
}

function targetOf(client: PgClient): string {
  const p = client.connectionParameters;
  return `a query to ${p?.host ?? 'PostgreSQL'}:${p?.port ?? ''}/${p?.database ?? ''}`;
}

/** Submits `this` only if the gate it was made under still lets it leave. */
function gatedSubmit(original: Submit, client: PgClient): Submit {
  const submit: Submit = function (this: PgQuery, connection: PgConnection): unknown {
    const refused = this[GATE]?.check(targetOf(client));
    if (!refused) return original.call(this, connection);
    // Not written. The socket's error fails this query and the client's others (one callback each).
    connection.stream?.destroy(refused);
    return undefined;
  };
  submit[GATED] = true;
  return submit;
}

function exemptStream(client: PgClient): void {
  exemptFromWireCheck(client.connection?.stream);
}

let installed = false;

/** Patches the `pg` this module resolves, once per process; inert for queries outside gated calls. */
export function installPgWireHook(s: PgWireScope): void {
  if (installed) return;
  installed = true;
  scope = s;
  type Fn<T = PgClient> = (this: T, ...args: unknown[]) => unknown;
  // pg's sockets are left to the query check (their startup and terminate messages included).
  const connection = pg.Connection.prototype as unknown as { connect: Fn<PgConnection> };
  const connect = connection.connect;
  connection.connect = function (this: PgConnection, ...args: unknown[]): unknown {
    exemptFromWireCheck(this.stream);
    return connect.apply(this, args);
  };
  const client = pg.Client.prototype as unknown as { query: Fn; _pulseQueryQueue?: Fn; end: Fn };
  const pulse = client._pulseQueryQueue;
  if (typeof pulse !== 'function') return; // another pg major: not checked (docs/ARCHITECTURE.md)
  const query = client.query;
  client.query = function (this: PgClient, ...args: unknown[]): unknown {
    exemptStream(this); // a client connected before the hook
    const gate = engineClients.has(this) ? undefined : scope!.currentGate();
    if (!gate) return query.apply(this, args);
    const outer = this[CAPTURED];
    this[CAPTURED] = gate;
    try {
      return query.apply(this, args);
    } finally {
      this[CAPTURED] = outer;
    }
  };
  // Inside `query()`, pg pushes the query and pulses the queue at once: the last one queued is it.
  client._pulseQueryQueue = function (this: PgClient, ...args: unknown[]): unknown {
    const gate = this[CAPTURED];
    if (gate) {
      this[CAPTURED] = undefined;
      const queued = this._queryQueue;
      const q = queued?.[queued.length - 1];
      if (q && typeof q.submit === 'function') {
        q[GATE] = gate;
        if (!q.submit[GATED]) q.submit = gatedSubmit(q.submit, this);
      }
    }
    return pulse.apply(this, args);
  };
  const end = client.end;
  client.end = function (this: PgClient, ...args: unknown[]): unknown {
    exemptStream(this);
    return end.apply(this, args);
  };
  let poolProto: { connect?: Fn } | null = pg.Pool.prototype as unknown as { connect?: Fn };
  while (poolProto && !Object.prototype.hasOwnProperty.call(poolProto, 'connect'))
    poolProto = Object.getPrototypeOf(poolProto) as { connect?: Fn } | null;
  const poolConnect = poolProto?.connect;
  if (poolProto && poolConnect) {
    poolProto.connect = function (this: PgClient, ...args: unknown[]): unknown {
      const cb = args[0];
      if (typeof cb === 'function') {
        // The caller's call (or none), not the releaser's: only the engine's storage is put back, which
        // costs a closure instead of an AsyncResource with its deprecation getters per checkout.
        const inCaller = scope!.capture();
        args[0] = function (this: unknown, ...a: unknown[]): unknown {
          return inCaller(() => (cb as (...x: unknown[]) => unknown).apply(this, a));
        };
      }
      return poolConnect.apply(this, args);
    };
  }
}
