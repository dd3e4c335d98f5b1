/**
 * The co-location design of docs/SCALE-OUT.md, as data the check holds the code to: which statements
 * must stay inside one run (one shard), and which are cross-run by design, each with its reason
 * (tables: placement.ts). Statement ids are `<file>#<CONSTANT>`.
 */

const S = 'src/store/';
const RS = 'src/store/run-state/';
const KEY_PK =
  'FINDING: ON CONFLICT (idempotency_key): ai_commands is keyed by the key alone; the key must become (run_id, idempotency_key)';
const SLOTS =
  "slots: frees the run's slots (ai_slots, by scope) and wakes the next run held on that scope (another run)";
const HANDOFF =
  "FINDING: hand-off: a start takes a slot of a worker's presence row (ai_workers, a reference table: a write goes to every node); sharded, keep hand-off slots per shard";

/**
 * Per-run statements: every reference to a run table must be pinned to ONE run (the same key), and no
 * other distributed table may be touched, except in the CTEs named in `allow` (cross-run by design, or a
 * finding), each with its reason. `finding: true` marks what is NOT co-location-safe today.
 */
export interface PerRun {
  allow?: Record<string, string>;
  finding?: boolean;
}
export const PER_RUN: Record<string, PerRun> = {
  [`${RS}step-write.ts#STEP_WRITE_SQL`]: {},
  [`${RS}step-write.ts#STEP_MARK_SQL`]: {},
  [`${RS}step-write.ts#TX_STEP_WRITE_SQL`]: {},
  [`${RS}step-write.ts#PROGRESS_SQL`]: {},
  [`${RS}step-write.ts#SET_TAGS_SQL`]: {},
  [`${RS}record-command.ts#RECORD_COMMAND_SQL`]: {},
  [`${RS}reserve-command.ts#RESERVE_COMMAND_SQL`]: { finding: true, allow: { cmd: KEY_PK } },
  [`${RS}command-in-doubt.ts#COMMAND_IN_DOUBT_SQL`]: {},
  [`${RS}cleanup-mark.ts#CLEANUP_MARK_SQL`]: {},
  [`${RS}stream-emit.ts#EMIT_SQL`]: {},
  [`${RS}load-replay.ts#LOAD_REPLAY_SQL`]: {},
  [`${RS}finish-run.ts#FINISH_RUN_SQL`]: { allow: { slot_free: SLOTS, slot_wake: SLOTS } },
  [`${RS}park-run.ts#PARK_RUN_SQL`]: {
    finding: true,
    allow: { cmd: KEY_PK, slot_free: SLOTS, slot_wake: SLOTS },
  },
  [`${RS}continue-run.ts#CONTINUE_RUN_SQL`]: { allow: { slot_free: SLOTS, slot_wake: SLOTS } },
  [`${RS}settle-waits.ts#SETTLE_WAITS_SQL`]: {
    finding: true,
    allow: {
      slot_free: SLOTS,
      slot_wake: SLOTS,
      cand: "FINDING: a child wait reads the CHILD's row (ai_runs by substr(name)::uuid): another run, another shard",
      sig: 'FINDING: the consumed signal is updated by its id alone (no run_id = $1): a multi-shard UPDATE',
    },
  },
  [`${S}sql/signal.sql.ts#SEND_SIGNAL_SQL`]: {},
  [`${S}run-control.store.ts#START_RUN_SQL`]: {
    finding: true,
    allow: {
      ins: 'FINDING: ON CONFLICT (idempotency_key): unique across runs; derive the id from the key instead',
      key_slots: "slots: a keyed run makes its key's slots",
      key_tokens: 'rate tokens of the key',
      w: HANDOFF,
      taken: HANDOFF,
    },
  },
  [`${S}run-control.store.ts#CANCEL_RUN_SQL`]: { allow: { slot_free: SLOTS, slot_wake: SLOTS } },
  [`${S}run-control.store.ts#RETRY_RUN_SQL`]: {},
  [`${S}run-reads.store.ts#GET_RUN_SQL`]: {},
  [`${RS}handoff.ts#HANDOFF_READ_SQL`]: {},
  [`${S}run-reads.store.ts#AWAIT_RUN_SQL`]: {},
  [`${S}run-reads.store.ts#RUN_OUTCOME_SQL`]: {},
  [`${S}run-reads.store.ts#CHECKPOINTS_NAMED_SQL`]: {},
  [`${S}run-reads.store.ts#TRACEPARENT_SQL`]: {},
  [`${S}admin-runs.store.ts#RUN_VERSION_SQL`]: {},
  [`${S}lease-holders.store.ts#HOLDER_SQL`]: {},
  [`${S}command.store.ts#LIST_COMMANDS_SQL`]: {},
  [`${S}command.store.ts#LIST_UNSETTLED_COMMANDS_SQL`]: {},
  [`${S}command.store.ts#RUN_COMMAND_SQL`]: {},
  [`${S}stream.store.ts#READ_STREAM_SQL`]: {},
  [`${S}replay-history.store.ts#RUN_SQL`]: {},
  [`${S}test-controls.ts#DUE_NOW_SQL`]: {},
  [`${S}test-controls.ts#WAIT_LEFT_SQL`]: {},
  [`${S}fork/fork-run.sql.ts#FORK_PLAN_SQL`]: {},
  [`${S}fork/rewind-run.sql.ts#REWIND_RUN_SQL`]: {},
  ...Object.fromEntries(
    [
      'HISTORY_SQL.events',
      'HISTORY_SQL.checkpoints',
      'HISTORY_SQL.commands',
      'CHECKPOINT_MARKS_SQL',
      'SHOWN_CHECKPOINTS_SQL',
      'USER_CHECKPOINTS_SQL',
    ]
      .flatMap((n) => [`${n}.after`, `${n}.before`])
      .map((n) => [`${S}run-history.ts#${n}`, {}]),
  ),
};

/** Why a statement is not per-run; `cross-run` and `other-data` are analysed, `meta` and `fragment` are not. */
export interface Exception {
  kind: 'cross-run' | 'other-data' | 'meta' | 'fragment';
  reason: string;
  finding?: boolean;
}
const cross = (reason: string, finding = false): Exception => ({ kind: 'cross-run', reason, finding });
const other = (reason: string): Exception => ({ kind: 'other-data', reason });
const CLAIM = 'the claim: due runs of any run, SKIP LOCKED (per-shard claim, SCALE-OUT.md "The claim")';
const LIST = 'admin/API list or count across runs: fan-out to every shard, keyset merge on the coordinator';
const SWEEP = 'maintenance sweep across runs: run per shard (run_command_on_shards / per-shard batches)';

const OTHER_DB = "durable transactions on another database: the app's tables there, not the module's";

export const EXCEPTIONS: Record<string, Exception> = {
  [`${S}transactions/other-database.sql.ts#CREATE_TABLES_SQL`]: {
    kind: 'meta',
    reason: 'durable transactions on another database: the DDL of its tables there (at first use)',
  },
  ...Object.fromEntries(
    ['MISSING_TABLES_SQL', 'FENCE_AND_READ_SQL', 'COMPLETE_SQL'].map((n) => [
      `${S}transactions/other-database.sql.ts#${n}`,
      other(OTHER_DB),
    ]),
  ),
  [`${RS}claim-runs.ts#CLAIM_RUNS_SQL`]: cross(CLAIM),
  [`${RS}claim-limited.ts#CLAIM_LIMITED_SQL`]: cross(`${CLAIM}; takes slots and rate tokens of other groups`),
  [`${RS}heartbeat.ts#HEARTBEAT_SQL`]: cross(
    'FINDING: one heartbeat renews every lease of a worker (id = any of an array): a multi-shard UPDATE; send one per shard group',
    true,
  ),
  [`${RS}step-batch.ts#STEP_BATCH_SQL`]: cross(
    'FINDING: group commit writes the steps of several runs of one worker (each row fenced by its run) in one statement: a multi-shard write; batch per shard group (SCALE-OUT.md "Group commit")',
    true,
  ),
  [`${RS}finish-batch.ts#FINISH_BATCH_SQL`]: cross(
    'FINDING: group commit of finishes (several runs of one worker, each row fenced by its run) in one statement: a multi-shard write; batch per shard group (SCALE-OUT.md "Group commit")',
    true,
  ),
  [`${RS}child-start.ts#START_CHILD_SQL`]: cross(
    "child start: the parent's fenced write and the child's insert (another shard) in one statement",
  ),
  [`${RS}child-start.ts#CANCEL_CHILD_SQL`]: cross(
    "child cancel: fenced by the parent, writes the child's row",
  ),
  [`${S}fork/fork-run.sql.ts#FORK_RUN_SQL`]: cross(
    "time travel: the original's record copied into a new run (another shard), the original fenced when cancelled",
  ),
  [`${RS}budget-charge.ts#CHARGE_BUDGET_SQL`]: cross(
    "budgets: ai_budget_charge runs on the budget's shard (distributed function by name)",
  ),
  [`${RS}budget-charge.ts#CORRECT_BUDGET_SQL`]: cross(
    'FINDING: budget use corrected by its id alone: needs the budget name to route',
    true,
  ),
  [`${RS}run-state.store.ts#OTHER_KINDS_SQL`]: cross(LIST),
  [`${S}run-control.store.ts#RUN_BY_KEY_SQL`]: cross(
    'FINDING: a run looked up by idempotency key; route by an id derived from the key',
    true,
  ),
  [`${S}debounced-start.ts#DEBOUNCED_START_SQL`]: cross(
    'FINDING: debounce: ON CONFLICT (kind, debounce_key) is a unique index across runs',
    true,
  ),
  [`${S}command.store.ts#DECIDE_COMMAND_SQL`]: cross(
    'FINDING: a command decided by its key alone (resolveCommand); the key names its run: route by it',
    true,
  ),
  [`${S}expired-leases.store.ts#RECLAIM_EXPIRED_SQL`]: cross(SWEEP),
  [`${S}expired-leases.store.ts#CANCEL_ORPHANS_SQL`]: cross(`${SWEEP}; parent and children`),
  [`${S}lease-holders.store.ts#HELD_BY_SQL`]: cross(`${LIST} (by worker)`),
  [`${S}lease-holders.store.ts#RELEASE_WORKER_SQL`]: cross(`${SWEEP} (by worker)`),
  [`${RS}handoff.ts#HANDOFF_RETURN_SQL`]: cross(`${SWEEP} (a stopping worker's hand-offs)`),
  [`${RS}handoff.ts#HANDOFF_WITHDRAW_SQL`]: other('worker presence (reference table)'),
  [`${S}limits.store.ts#DECLARE_LIMITS_SQL`]: cross('limits: declares caps and slots; wakes held runs'),
  [`${S}limits.store.ts#DROP_LIMITS_SQL`]: other(
    'limits (reference table): kinds without limits lose their rows',
  ),
  [`${S}limits.store.ts#WAKE_HELD_SQL`]: cross(`slots: ${SWEEP}`),
  [`${S}sql/retry-held.sql.ts#RETRY_HELD_SQL`]: cross(`${SWEEP} (by kind)`),
  [`${S}replay-history.store.ts#KIND_RUNS_SQL`]: cross(LIST),
  [`${S}admin-runs.store.ts#ADMIN_LIST_RUNS_SQL`]: cross(LIST),
  [`${S}admin-runs.store.ts#ADMIN_LIST_RUNS_BY_TAG_SQL`]: cross(`${LIST}; tag search per shard`),
  [`${S}run-reads.store.ts#LIST_RUNS_SQL`]: cross(LIST),
  [`${S}run-reads.store.ts#LIST_RUNS_BY_TAG_SQL`]: cross(`${LIST}; tag search per shard`),
  [`${S}run-reads.store.ts#PATCH_STATUS_SQL`]: cross(LIST),
  [`${S}sql/kind-versions.sql.ts#KIND_VERSIONS_SQL`]: cross(LIST),
  [`${S}run-stats.reader.ts#RUN_STATS_SQL`]: cross(LIST),
  [`${S}run-stats.reader.ts#BACKLOG_SQL`]: cross(LIST),
  [`${S}worker-presence.store.ts#WORKERS_SQL`]: cross(LIST),
  [`${S}retention.store.ts#RETENTION_PRUNE_SQL`]: cross(`retention: ${SWEEP}`),
  [`${S}retention.store.ts#RETENTION_DELETE_RUNS_SQL`]: cross(`retention: ${SWEEP}`),
  [`${S}retention.store.ts#RETENTION_PARTITION_CHECK_SQL`]: {
    kind: 'meta',
    reason: 'retention by event partition: per node, on partitions',
  },
  [`${S}retention.store.ts#RETENTION_PARTITION_PRUNE_SQL`]: {
    kind: 'meta',
    reason: 'retention by event partition: per node, on partitions',
  },
  [`${S}retention-privileges.ts#RETENTION_PRIVILEGES_SQL`]: {
    kind: 'meta',
    reason: "retention's boot check: the role's privileges (catalog)",
  },
  [`${S}schedule-fire.sql.ts#FIRE_SQL`]: cross(
    "schedules: locks the schedule (its shard) and inserts its tick's runs (theirs)",
  ),
  [`${S}test-controls.ts#EXPIRE_CRASHED_LEASES_SQL`]: cross(`test control: ${SWEEP}`),
  [`${S}test-controls.ts#ADVANCE_CLOCK_SQL`]: cross('test control: every waiting run when no id is given'),
  [`${S}test-controls.ts#REWIND_SCHEDULE_SQL`]: other('a schedule row'),
  [`${S}admin-sessions.store.ts#CREATE_SQL`]: other('admin sessions (coordinator-local)'),
  [`${S}admin-sessions.store.ts#FIND_SQL`]: other('admin sessions (coordinator-local)'),
  [`${S}admin-sessions.store.ts#REVOKE_SQL`]: other('admin sessions (coordinator-local)'),
  ...Object.fromEntries(
    [
      'DECLARE_SQL',
      'FORGET_SQL',
      'CREATE_SQL',
      'REMOVE_SQL',
      'DUE_SQL',
      'LIST_SQL',
      'GET_SQL',
      'PAUSE_SQL',
    ].map((n) => [`${S}schedules.store.ts#${n}`, other('schedules (by name)')]),
  ),
  ...Object.fromEntries(
    ['WORKER_BEAT_SQL', 'WORKER_LEAVE_SQL', 'KIND_SERVED_SQL', 'KIND_KEYED_SQL'].map((n) => [
      `${S}worker-presence.store.ts#${n}`,
      other('worker presence and limits (reference tables)'),
    ]),
  ),
  [`${S}replication.store.ts#REPLICATION_SQL`]: other('server settings (per node)'),
  [`${S}run-stats.reader.ts#PING_SQL`]: other('health ping'),
  [`${S}event-partitions.store.ts#EVENT_PARTITIONS_SQL`]: {
    kind: 'meta',
    reason: 'event partitions (catalog)',
  },
  [`${S}event-partitions.store.ts#WEEK_START_SQL`]: other('the clock'),
  [`${S}event-partitions.store.ts#TRY_LOCK_SQL`]: other('an advisory lock'),
  [`${S}run-keyset.ts#CURSOR_KEY_SQL`]: {
    kind: 'fragment',
    reason: 'a select-list expression of the list statements',
  },
};

/** Files whose inline (non-constant) statements are boot, DDL or session commands: never on a run's path. */
export const INLINE_META: Record<string, string> = {
  'src/store/durable-database.ts': 'transaction control (begin/commit/rollback)',
  'src/store/durable-names.ts': 'schema creation at boot',
  'src/store/run-migrations.ts': 'migrations and their advisory lock (coordinator)',
  'src/store/schema-check.ts': 'catalog check at boot',
  'src/store/wake-listener.ts': 'LISTEN (coordinator, see SCALE-OUT.md "Notifications")',
  'src/store/schedules.store.ts': 'the database clock',
  'src/store/event-partitions.store.ts': 'event partition DDL (per node after distribution)',
  'src/store/transactions/transaction.store.ts':
    "durable transactions: begin/commit/rollback, a statement's cancel, the same-database probe (advisory lock)",
};

/** Statements that reach a query through a local variable, with the constants they may be. */
export const DYNAMIC: Record<string, string[]> = {
  'src/store/run-history.ts#readHistory:sql': [
    'HISTORY_SQL',
    'CHECKPOINT_MARKS_SQL',
    'SHOWN_CHECKPOINTS_SQL',
    'USER_CHECKPOINTS_SQL',
  ].map((n) => `${S}run-history.ts#${n}.`),
};

/** Functions the migrations leave: per-run (their statements pinned to `new.id`) or an exception. */
export const FUNCTIONS: Record<string, { perRun: true } | { reason: string }> = {
  ai_run_tags_sync: { perRun: true },
  ai_run_ended: {
    reason:
      'run-ended trigger: writes the PARENT (signal, event, wake) and cancels the CHILDREN: an outbox in SCALE-OUT.md',
  },
  ai_budget_charge: { reason: "budgets: runs on the budget's shard (create_distributed_function by p_name)" },
};
