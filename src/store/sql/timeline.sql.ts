/**
 * The server's WAL timeline, read from its current WAL file name (`pg_control_checkpoint()` would show the
 * old one after a promotion until the next checkpoint). A promotion or a point-in-time recovery starts a
 * new timeline: the commits the old one made after the fork may be lost. Only a primary can answer.
 */
export const CURRENT_TIMELINE = `('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int`;
