import { Injectable } from '@nestjs/common';
import type { RunStatus, RunView } from '../interfaces/run.interface';
import { DurableDatabase } from './durable-database';
import { runViewColumns, toRunView } from './run-row.mapper';
import { SEND_SIGNAL_SQL, SignalSent, SignalToSend, signalParams, signalSent } from './sql/signal.sql';
import { RETRY_HELD_SQL } from './sql/retry-held.sql';
import type { SqlText } from './durable-names';
import { keyLimitRows, releaseSlots } from './run-state/slots';
import { startDebounced } from './debounced-start';
import { closeUnsentCommands } from './sql/close-unsent.sql';
import { RECORD_FORMAT } from './record-format';
import { RunForkStore } from './fork/run-fork.store';
import {
  HANDED_COLUMNS,
  HANDED_VALUES,
  handedEvent,
  handoffWorker,
  startNotice,
  takeSlot,
} from './sql/handoff-start.sql';

/**
 * Insert a run and its `run.created` event in one statement. ON CONFLICT on the unique
 * idempotency_key makes a concurrent duplicate wait for the first insert and then insert nothing;
 * the caller reads the winner back. pg_notify is delivered at commit and wakes idle workers. A run
 * with a concurrency key of a kind with a per-key limit gets its key's slots (`ai_slots`) and rate
 * tokens (`ai_rate_tokens`) when they are missing. The result names its columns (RUN_VIEW_COLUMNS): a
 * named statement's result must not change with the table's.
 * Hand-off (handoff-start.sql.ts): when a live worker offers a slot for the run, the same statement
 * takes the slot and inserts the run already `running` for that worker (epoch 1, its attempt counted,
 * the worker's short hand-off lease) with its `run.claimed` event, and the NOTIFY names the run for that
 * worker: it begins with a read of the row, no claim commit in between.
 * $1 kind, $2 input, $3 idempotency key, $4 max attempts, $5 run at, $6 priority, $7 event payload,
 * $8 channel, $9 concurrency key, $10 tags, $11 kind version, $12 a hand-off allowed
 */
export const START_RUN_SQL: SqlText = (t) => `
with ${handoffWorker(t)}, ins as (
  insert into ${t.runs} (kind, input, idempotency_key, max_attempts, available_at, priority, concurrency_key, tags,
                         record_format, ${HANDED_COLUMNS})
  values ($1, $2::jsonb, $3, $4, coalesce($5::timestamptz, now()), $6, $9, $10::jsonb, ${RECORD_FORMAT},
          ${HANDED_VALUES})
  on conflict (idempotency_key) do nothing
  returning *
), ${takeSlot(t, 'ins')}, ${keyLimitRows(t, 'ins')}, ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select id, 'run.created', 0, $7::jsonb from ins
  union all${handedEvent('ins')}
)
select ${runViewColumns('ins')},
       (select count(pg_notify($8, ${startNotice('ins')})) from ins where ins.available_at <= now()) as notified
from ins`;

/**
 * Read back the run that owns an idempotency key (after a conflict), and whether its stored input
 * equals this start's (jsonb equality: key order and number spelling do not matter).
 * $1 idempotency key, $2 input
 */
export const RUN_BY_KEY_SQL: SqlText = (t) =>
  `select ${runViewColumns()}, input = $2::jsonb as same_input from ${t.runs} where idempotency_key = $1`;

/**
 * Cancel as a recorded request. A run nobody drives (pending/waiting) is cancelled at once; a running
 * one gets cancel_requested_at, which its worker observes at the next heartbeat or step boundary.
 * The row lock (FOR UPDATE) orders this against a concurrent claim. One event either way.
 * $1 run id, $2 reason, $3 event payload
 */
export const CANCEL_RUN_SQL: SqlText = (t) => `
with cur as (
  select id, status, epoch from ${t.runs} where id = $1 for update
), upd as (
  -- Decided on the row's newest version (r), never on cur's: a claim that committed in between must
  -- not see its running row turned 'cancelled' with an owner (the status/owner check would fail).
  update ${t.runs} r
     set status = case when r.status in ('pending', 'waiting') then 'cancelled' else r.status end,
         finished_at = case when r.status in ('pending', 'waiting') then now() else r.finished_at end,
         cancel_requested_at = coalesce(r.cancel_requested_at, now()),
         cancel_reason = coalesce(r.cancel_reason, $2),
         updated_at = now()
    from cur
   where r.id = cur.id and r.status in ('pending', 'waiting', 'running')
  returning r.id, r.status, r.epoch, r.notify_on_finish
), doubt as (
  update ${t.commands} c set status = 'in_doubt', updated_at = now()
    from upd where c.run_id = upd.id and upd.status = 'cancelled' and c.status = 'pending'
), ${closeUnsentCommands(t, "upd.status = 'cancelled'", 'upd')}, ${releaseSlots(
  t,
  // A waiting run of a kind that holds its slots while waiting owns some.
  "(select id, epoch from upd where status = 'cancelled')",
)}, ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select id, case when status = 'cancelled' then 'run.cancelled' else 'run.cancel_requested' end, epoch, $3::jsonb
    from upd
)
select cur.status as previous_status, upd.status as status,
       (select count(pg_notify('${t.doneChannel}', u.id::text)) from upd u
         where u.notify_on_finish and u.status = 'cancelled') as announced
  from cur left join upd on upd.id = cur.id`;

/**
 * Re-drive a dead-lettered (or failed) run from its last checkpoint: back to `waiting`, attempts
 * reset, error kept in the event. Checkpoints are untouched, so replay skips every committed step.
 * $1 run id, $2 event payload, $3 channel
 */
export const RETRY_RUN_SQL: SqlText = (t) => `
with cur as (
  select id, case when status = 'waiting' and error->>'code' = 'DURABLE_NON_DETERMINISM' and available_at = 'infinity'
                  then 'held' else status end as status
    from ${t.runs} where id = $1 for update
), upd as (
  update ${t.runs} r
     set status = 'waiting', attempts = 0, available_at = now(), error = null, finished_at = null,
         parked_reason = null, updated_at = now()
    from cur
   where r.id = cur.id and cur.status in ('dead_lettered', 'failed', 'held')
  returning r.id, r.epoch, r.kind
), ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select id, 'run.retried', epoch, $2::jsonb from upd
)
select cur.status as previous_status, (select count(pg_notify($3, upd.kind)) from upd) as woke
  from cur`;

/** A new run's values (START_RUN_SQL). */
export interface NewRun {
  kind: string;
  inputJson: string;
  idempotencyKey: string | null;
  maxAttempts: number;
  /** When it is due; null: now. */
  runAt: Date | null;
  priority: number;
  /** The `run.created` event's payload. */
  event: string;
  /** Its key for a per-key concurrency limit; null: none. */
  concurrencyKey: string | null;
  /** Tags as JSON text, or null. */
  tags: string | null;
  /** The version it is pinned to; null: its first claim pins it. */
  kindVersion: number | null;
  /** The start may hand the run to an idle worker (false: its kind's declaration here has a limit). */
  handoff?: boolean;
}

/** The run that holds an idempotency key, and whether its input equals the one a start brought. */
export interface KeyHolder {
  run: RunView;
  sameInput: boolean;
}

/**
 * The run API's writes to a run from outside it (start, cancel, retry, signal), one statement each;
 * every one that may make a run due wakes idle workers on the schema's wake channel. @internal
 */
@Injectable()
export class RunControlStore {
  /** `RunRepository.fork`'s plan and statement. */
  readonly forks: RunForkStore;

  constructor(private readonly db: DurableDatabase) {
    this.forks = new RunForkStore(db);
  }

  /** Inserts the run and its `run.created` event; null when its idempotency key is already taken. */
  async insert(run: NewRun): Promise<RunView | null> {
    const { rows } = await this.db.query(
      START_RUN_SQL,
      [
        run.kind,
        run.inputJson,
        run.idempotencyKey,
        run.maxAttempts,
        run.runAt,
        run.priority,
        run.event,
        this.db.names.wakeChannel,
        run.concurrencyKey,
        run.tags,
        run.kindVersion,
        run.handoff ?? true,
      ],
      'dx_start',
    );
    return rows.length ? toRunView(rows[0]) : null;
  }

  /** A start of a debounced kind: see DEBOUNCED_START_SQL. */
  startDebounced(run: NewRun, debounce: { key: string; periodMs: number }) {
    return startDebounced(this.db, run, debounce);
  }

  /** The run holding `key` (compared with `inputJson`), or undefined when none does (any more). */
  async holderOf(key: string, inputJson: string): Promise<KeyHolder | undefined> {
    const row = (await this.db.query(RUN_BY_KEY_SQL, [key, inputJson], 'dx_run_by_key')).rows[0];
    return row && { run: toRunView(row), sameInput: row.same_input };
  }

  /**
   * Cancels the run, or records the request for its worker; its status before and after (null: it
   * was not live, nothing changed), or undefined for an unknown run.
   */
  async cancel(
    id: string,
    reason: string | null,
    event: string,
  ): Promise<{ previousStatus: RunStatus; status: RunStatus | null } | undefined> {
    const { rows } = await this.db.query(CANCEL_RUN_SQL, [id, reason, event]);
    return rows[0] && { previousStatus: rows[0].previous_status, status: rows[0].status };
  }

  /** Re-drives a dead-lettered or failed run; its status before (any other: nothing changed), or undefined for an unknown run. */
  /** Re-drives up to `limit` runs of `kind` (`version`) held on non-determinism (RETRY_HELD_SQL); how many. */
  async retryHeld(
    kind: string,
    limit: number,
    event: string,
    version: number | null = null,
  ): Promise<number> {
    const { rows } = await this.db.query(RETRY_HELD_SQL, [
      kind,
      limit,
      event,
      this.db.names.wakeChannel,
      version,
    ]);
    return rows[0].retried;
  }

  async retry(id: string, event: string): Promise<{ previousStatus: RunStatus | 'held' } | undefined> {
    const { rows } = await this.db.query(RETRY_RUN_SQL, [id, event, this.db.names.wakeChannel]);
    return rows[0] && { previousStatus: rows[0].previous_status };
  }

  /**
   * Stores a signal for a live run unless its mailbox is full, and wakes it if it waits
   * (SEND_SIGNAL_SQL); undefined for an unknown run.
   */
  async signal(s: SignalToSend): Promise<SignalSent | undefined> {
    const { rows } = await this.db.query(SEND_SIGNAL_SQL, signalParams(s, this.db.names.wakeChannel));
    return rows[0] && signalSent(rows[0]);
  }
}
