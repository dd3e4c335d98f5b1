import { Injectable } from '@nestjs/common';
import { DurableDatabase } from './durable-database';

/**
 * What the module's own session says about replication, in one statement: its `synchronous_commit`
 * (a pool's session settings count: they decide what a commit waits for), the server's
 * `synchronous_standby_names`, whether it is itself a standby, and the standbys streaming from it.
 * Without `pg_read_all_stats` (or `pg_monitor`) PostgreSQL hides a standby's state and sync state: they
 * read null.
 */
export const REPLICATION_SQL = `
select current_setting('synchronous_commit') as synchronous_commit,
       current_setting('synchronous_standby_names') as synchronous_standby_names,
       pg_is_in_recovery() as in_recovery,
       coalesce((select json_agg(json_build_object('name', application_name, 'state', state,
                                                   'syncState', sync_state) order by application_name)
                   from pg_stat_replication), '[]'::json) as standbys`;

/** One standby streaming from the server, as `pg_stat_replication` shows it. */
export interface StandbyView {
  /** Its `application_name` (from its `primary_conninfo`). */
  name: string;
  /** `streaming`, `catchup`, ...; null when the module's user may not see it. */
  state: string | null;
  /** `sync`, `quorum`, `potential` or `async`; null when the module's user may not see it. */
  syncState: string | null;
}

/** The settings REPLICATION_SQL reads. */
export interface ReplicationSettings {
  synchronousCommit: string;
  synchronousStandbyNames: string;
  inRecovery: boolean;
  standbys: StandbyView[];
}

/** Reads replication settings for the start-up check and the health route. Never on a run's path. @internal */
@Injectable()
export class ReplicationStore {
  constructor(private readonly db: DurableDatabase) {}

  async read(): Promise<ReplicationSettings> {
    const { rows } = await this.db.query<{
      synchronous_commit: string;
      synchronous_standby_names: string;
      in_recovery: boolean;
      standbys: StandbyView[];
    }>(REPLICATION_SQL);
    const r = rows[0];
    return {
      synchronousCommit: r.synchronous_commit,
      synchronousStandbyNames: r.synchronous_standby_names,
      inRecovery: r.in_recovery,
      standbys: r.standbys,
    };
  }
}
