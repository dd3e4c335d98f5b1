/**
 * A case's database on a PostgreSQL primary and a streaming standby of its own (test/helpers/
 * replica-set.ts), reached through a switch as workers reach a primary behind DNS or a proxy. The
 * lost-suffix fault is a real asynchronous failover: the standby's link pauses, the primary goes on
 * committing for a window, stops at once, the standby is promoted (a new WAL timeline, without what the
 * window committed) and the workers' connections move to it.
 */
import { createTestSchema, queryOnce, TestDatabase, TestSchema } from '../helpers/database';
import { startReplicaSet } from '../helpers/replica-set';
import { startTcpSwitch } from '../helpers/tcp-switch';
import { timelineOf, World } from './world';

export interface LostSuffixRig {
  /** The case's schema on the primary (after the fault: on the promoted standby). */
  db: TestSchema;
  /**
   * Pauses replication, waits `windowMs` (the primary commits what the standby will never see), stops
   * the primary at once, promotes the standby and switches new connections to it (open ones are cut).
   * Returns how many of the case's events the new primary lacks (commits lost with the old one; a
   * lower bound: counted at the window's end, just before the stop).
   */
  fail(windowMs: number): Promise<number>;
  /** Stops both servers and removes their files. */
  dispose(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startLostSuffixRig(): Promise<LostSuffixRig> {
  const rs = await startReplicaSet();
  const link = await startTcpSwitch(rs.primaryPort);
  const url = `postgres://postgres@127.0.0.1:${link.port}/postgres`;
  const query = (sql: string, params?: unknown[]) => queryOnce({ connectionString: url }, sql, params);
  const host: TestDatabase = { name: 'postgres', url, query, drop: async () => undefined };
  const dispose = async () => {
    await link.close();
    await rs.dispose();
  };
  // The servers are the case's own: dropping the case's database is stopping them.
  const db: TestSchema = { ...createTestSchema(host, 'case'), drop: dispose };
  return {
    db,
    async fail(windowMs) {
      const events = `select count(*)::int as n from "${db.schema}".ai_events`;
      rs.replication.pause();
      await sleep(windowMs);
      const before = (await rs.primary<{ n: number }>(events).catch(() => [{ n: 0 }]))[0].n;
      await rs.stopPrimary();
      rs.replication.cut(); // what the link still held never reaches the standby
      await rs.promote();
      const after = (await rs.standby<{ n: number }>(events))[0].n;
      link.switchTo(rs.standbyPort);
      return Math.max(0, before - after);
    },
    dispose,
  };
}

/**
 * What a case's lost suffix did, for the coverage table: events the new primary lacked, step bodies run
 * on the old timeline and again on the new one, commands an old-timeline claim sent that a new-timeline
 * claim found by a lookup (not sent again), commands keyed by position that the re-run numbered anew
 * (applied under two keys: the hazard the `key` option removes), and commands parked in doubt by a
 * claim on the new timeline.
 */
export async function lostSuffixCoverage(
  world: World,
  db: TestSchema,
  runIds: string[],
  eventsLost: number,
  keyed: (runId: string, op: string) => boolean,
): Promise<Array<[string, number]>> {
  const after = world.lostSuffix?.timeline;
  if (!after) return [];
  const byOp = new Map<string, Set<boolean>>();
  for (const e of world.executions) {
    const k = `${e.runId}/${e.op}`;
    byOp.set(k, (byOp.get(k) ?? new Set()).add(timelineOf(e.epoch) >= after));
  }
  const calls = [...world.dedup.calls, ...world.plain.calls];
  const old = new Map(calls.filter((c) => timelineOf(c.token) < after).map((c) => [c.key, c]));
  const rows = await db.query<{ idempotency_key: string; resolution: string | null }>(
    `select idempotency_key, resolution from ai_commands
      where run_id = any($1) or run_id in (select id from ai_runs where parent_id = any($1))`,
    [runIds],
  );
  const found = rows.filter((r) => old.has(r.idempotency_key) && r.resolution === 'lookup');
  const isKeyed = (key: string) => keyed(old.get(key)!.runId, old.get(key)!.op);
  const applied = new Map<string, Set<string>>();
  for (const c of calls.filter((x) => x.applied && !keyed(x.runId, x.op)))
    applied.set(`${c.runId}/${c.op}`, (applied.get(`${c.runId}/${c.op}`) ?? new Set()).add(c.key));
  const parked = await db.query<{ n: number }>(
    `select count(*)::int as n from ai_events e
      where e.run_id = any($1) and e.event_type = 'command.in_doubt'
        and exists (select 1 from ai_events c where c.run_id = e.run_id and c.epoch = e.epoch
                       and c.event_type = 'run.claimed' and (c.payload->>'timeline')::int >= $2)`,
    [runIds, after],
  );
  return [
    ['fault: lost-suffix (events the new primary lacked)', eventsLost],
    [
      'fault: lost-suffix (a step run on both timelines)',
      [...byOp.values()].filter((x) => x.size === 2).length,
    ],
    [
      'fault: lost-suffix (a keyed command sent before, found by a lookup after)',
      found.filter((r) => isKeyed(r.idempotency_key)).length,
    ],
    [
      'fault: lost-suffix (a positional command sent before, found by a lookup after)',
      found.filter((r) => !isKeyed(r.idempotency_key)).length,
    ],
    [
      'fault: lost-suffix (a positional command numbered anew, applied under two keys)',
      [...applied.values()].filter((x) => x.size > 1).length,
    ],
    ['fault: lost-suffix (a command parked in doubt on the new timeline)', parked[0].n],
  ];
}
