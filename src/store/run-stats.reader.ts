import { Injectable } from '@nestjs/common';
import { DurableDatabase } from './durable-database';
import type { SqlText } from './durable-names';

/**
 * Due and claimable: the claim query's conditions, and the predicate of its partial index
 * ai_runs_claim_idx (a run held back by a concurrency limit waits for a slot, not for a worker).
 */
const DUE = `status in ('pending', 'waiting') and limited_by is null and available_at <= now() and attempts < max_attempts`;

/**
 * The operator's numbers in one round trip, read at scrape or page time, never on the hot path: runs by
 * status (a full count: O(ai_runs), which is why metrics cache it for a few seconds), in-doubt commands
 * (served by the partial index ai_commands_unsettled_idx), and the due backlog, read through the claim
 * index ai_runs_claim_idx with the claim query's own conditions, so "due" means what a worker would claim
 * (in all and by kind); of those, by kind, the ones no live worker serves (no unexpired `ai_workers` row
 * lists the kind); runs held back by a full concurrency limit, by scope (ai_runs_limited_idx); the
 * schedules with their ticks; and each model budget with its use in the current window.
 */
export const RUN_STATS_SQL: SqlText = (t) => `
with due as (
  select kind, count(*)::int as depth, min(available_at) as oldest from ${t.runs}
   where ${DUE} group by kind
)
select (select coalesce(jsonb_object_agg(status, n), '{}'::jsonb)
          from (select status, count(*) as n from ${t.runs} group by status) s) as by_status,
       (select count(*) from ${t.commands} where status = 'in_doubt')::int as in_doubt,
       (select coalesce(sum(depth), 0) from due)::int as depth,
       coalesce((select extract(epoch from now() - min(oldest)) * 1000 from due), 0)::float8 as oldest_due_ms,
       (select coalesce(jsonb_object_agg(kind, jsonb_build_array(depth, extract(epoch from now() - oldest) * 1000)),
                        '{}'::jsonb) from due) as due_by_kind,
       (select coalesce(jsonb_object_agg(kind, depth), '{}'::jsonb) from due
         where not exists (select 1 from ${t.workers} w where w.expires_at > now() and due.kind = any(w.kinds))) as unserved,
       (select coalesce(jsonb_object_agg(limited_by, n), '{}'::jsonb)
          from (select limited_by, count(*) as n from ${t.runs}
                 where limited_by is not null and status in ('pending', 'waiting') group by limited_by) h) as held_back,
       (select coalesce(jsonb_agg(jsonb_build_object('name', name, 'nextAt', next_at, 'lastAt', last_at,
                                                     'paused', paused) order by name), '[]'::jsonb)
          from ${t.schedules}) as schedules,
       (select coalesce(jsonb_agg(jsonb_build_object('name', b.name, 'requests', b.requests, 'tokens', b.tokens,
                                                     'periodMs', b.period_ms, 'usedRequests', u.n,
                                                     'usedTokens', u.used) order by b.name), '[]'::jsonb)
          from ${t.budgets} b
          cross join lateral (select count(*)::int as n, coalesce(sum(x.tokens), 0)::float8 as used
                                from ${t.budgetUse} x
                               where x.budget = b.name and x.at > now() - b.period_ms * interval '1 millisecond') u
       ) as budgets`;

/**
 * The health check's backlog: how many runs are due and how long the oldest has waited, by the database
 * clock. Same conditions as the claim query and read through its partial index (ai_runs_claim_idx), so a
 * probe every few seconds stays cheap however much terminal history the table holds.
 */
export const BACKLOG_SQL: SqlText = (t) => `
select count(*)::int as depth,
       coalesce(extract(epoch from now() - min(available_at)) * 1000, 0)::float8 as oldest_due_ms
  from ${t.runs}
 where ${DUE}`;

/** The health check's "the database answers". */
export const PING_SQL = 'select 1';

/** The operator's numbers: runs by status, in-doubt commands, the due backlog. */
export interface RunStats {
  byStatus: Record<string, number>;
  inDoubtCommands: number;
  /** Runs due now and not yet claimed. */
  queueDepth: number;
  /** How long the oldest due run has waited (database clock), 0 when none is due. */
  oldestDueAgeMs: number;
  /** Runs due now whose kind no live worker serves, by kind (none: `{}`): they wait for a worker. */
  dueWithoutWorker: Record<string, number>;
  /** Runs due now and not yet claimed, and how long the oldest has waited, by kind. */
  dueByKind: Record<string, { queueDepth: number; oldestDueAgeMs: number }>;
  /**
   * Runs held back because a concurrency limit is full (not in `queueDepth`), by scope: `["kind"]` or
   * `["kind", "key"]` as JSON text.
   */
  heldBack: Record<string, number>;
  /** The `@DurableCron` schedules: next and last tick (null: none yet), paused. */
  schedules: Array<{ name: string; nextAt: string; lastAt: string | null; paused: boolean }>;
  /**
   * The model budgets (as last declared) and their use in the window ending now: calls admitted and
   * tokens charged (estimates until the calls' usage replaced them).
   */
  budgets: Array<{
    name: string;
    requests: number | null;
    tokens: number | null;
    periodMs: number;
    usedRequests: number;
    usedTokens: number;
  }>;
}

/** The due backlog alone (cheap: the claim index). */
export interface Backlog {
  queueDepth: number;
  oldestDueAgeMs: number;
}

/**
 * Reads run statistics, and answers the health check's ping, one statement each. Never used on the hot
 * path. @internal
 */
@Injectable()
export class RunStatsReader {
  constructor(private readonly db: DurableDatabase) {}

  /** Runs by status, in-doubt commands and the due backlog (RUN_STATS_SQL). */
  async read(): Promise<RunStats> {
    const { rows } = await this.db.query(RUN_STATS_SQL, [], 'dx_run_stats');
    const r = rows[0];
    const byStatus: Record<string, number> = {};
    for (const [status, n] of Object.entries(r.by_status ?? {})) byStatus[status] = Number(n);
    return {
      byStatus,
      inDoubtCommands: r.in_doubt,
      queueDepth: r.depth,
      oldestDueAgeMs: Math.max(0, Math.round(r.oldest_due_ms)),
      dueWithoutWorker: Object.fromEntries(Object.entries(r.unserved ?? {}).map(([k, n]) => [k, Number(n)])),
      dueByKind: Object.fromEntries(
        Object.entries((r.due_by_kind ?? {}) as Record<string, [number, number]>).map(([k, [n, ms]]) => [
          k,
          { queueDepth: Number(n), oldestDueAgeMs: Math.max(0, Math.round(Number(ms))) },
        ]),
      ),
      heldBack: Object.fromEntries(Object.entries(r.held_back ?? {}).map(([k, n]) => [k, Number(n)])),
      schedules: r.schedules ?? [],
      budgets: r.budgets ?? [],
    };
  }

  /** Resolves once the database answered a trivial statement. */
  async ping(): Promise<void> {
    await this.db.query(PING_SQL);
  }

  /** The due backlog alone (BACKLOG_SQL). */
  async backlog(): Promise<Backlog> {
    const { rows } = await this.db.query(BACKLOG_SQL, [], 'dx_backlog');
    return { queueDepth: rows[0].depth, oldestDueAgeMs: Math.max(0, Math.round(rows[0].oldest_due_ms)) };
  }
}
