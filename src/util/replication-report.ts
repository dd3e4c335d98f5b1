/** What the module's settings and a failover of its database would mean (docs/OPERATIONS.md, "Replication and failover"). */
export type ReplicationMode =
  /** No standby streams from this server and none is required: nothing to fail over to (at PostgreSQL's level). */
  | 'single'
  /** Every commit of the module waits for a synchronous standby: a promotion of that standby loses no acknowledged commit. */
  | 'synchronous'
  /** Standbys stream, but the module's commits do not wait for one: a promotion can lose acknowledged commits. */
  | 'asynchronous'
  /** The module is connected to a standby (read-only): its writes fail. */
  | 'standby';

/** The settings a report is made from (ReplicationStore reads them). */
export interface ReplicationInput {
  synchronousCommit: string;
  synchronousStandbyNames: string;
  inRecovery: boolean;
  standbys: { name: string; state: string | null; syncState: string | null }[];
}

/** The mode, and one sentence per thing an operator should change. */
export interface ReplicationReport extends ReplicationInput {
  mode: ReplicationMode;
  warnings: string[];
}

/** `synchronous_commit` values whose commits wait for the synchronous standby to flush (or apply) them. */
const WAITS_FOR_FLUSH = new Set(['on', 'remote_apply']);
const SYNC_STATES = new Set(['sync', 'quorum']);

const ADVICE =
  'set synchronous_standby_names, keep synchronous_commit at on (or remote_apply) for the module, and ' +
  'let the failover manager promote only a synchronous standby';

/** Classifies replication settings (docs/OPERATIONS.md, "Replication and failover"). */
export function replicationReport(s: ReplicationInput): ReplicationReport {
  const warnings: string[] = [];
  const report = (mode: ReplicationMode): ReplicationReport => ({ ...s, mode, warnings });
  if (s.inRecovery) {
    warnings.push(
      'the module is connected to a standby (read-only, in recovery): every write fails; point it at the primary',
    );
    return report('standby');
  }
  const commit = s.synchronousCommit;
  const required = s.synchronousStandbyNames.trim() !== '';
  if (!s.standbys.length && !required) {
    if (commit === 'off')
      warnings.push(
        'synchronous_commit is off for the module: a server crash can lose commits it was told had been made ' +
          '(a checkpoint, a reserved command), and a side effect may then be made twice; set it to on',
      );
    return report('single');
  }
  const unseen = s.standbys.filter((x) => x.syncState === null).map((x) => x.name);
  if (unseen.length)
    warnings.push(
      `the sync state of standby(s) ${unseen.join(', ')} is hidden from the module's database user: ` +
        'grant it pg_monitor (or pg_read_all_stats) so this check can tell synchronous from asynchronous',
    );
  if (!required || !WAITS_FOR_FLUSH.has(commit)) {
    const why = !required
      ? 'synchronous_standby_names is empty'
      : `synchronous_commit is ${commit} for the module (a commit does not wait for the standby to flush it)`;
    warnings.push(
      `asynchronous replication (${why}): a failover to a standby can lose commits the module was told had ` +
        `been made, and with them leases, checkpoints and reserved commands; ${ADVICE}`,
    );
    return report('asynchronous');
  }
  const sync = s.standbys.filter((x) => x.syncState !== null && SYNC_STATES.has(x.syncState));
  const async = s.standbys.filter((x) => x.syncState !== null && !SYNC_STATES.has(x.syncState));
  if (!sync.length && !unseen.length)
    warnings.push(
      'synchronous_standby_names is set but no synchronous standby is connected: every commit of the module ' +
        'waits until one is',
    );
  if (async.length)
    warnings.push(
      `standby(s) ${async.map((x) => `${x.name} (${x.syncState})`).join(', ')} are not synchronous: a ` +
        'failover manager must never promote them while the synchronous standby is alive (it would lose commits)',
    );
  return report('synchronous');
}
