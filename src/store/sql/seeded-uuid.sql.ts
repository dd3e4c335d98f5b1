/**
 * A UUID (shaped as version 4) from the md5 of the SQL text expression `seed`: the same seed gives the
 * same id on any server. For runs the engine itself creates under a key (a child run, a schedule's
 * tick): created again after a failover lost the first one, the run has the same id, so its commands
 * have the same keys and a lookup or a deduplicating target finds what the lost one sent.
 */
export const seededUuid = (seed: string): string =>
  `overlay(overlay(md5(${seed}) placing '4' from 13 for 1) placing '8' from 17 for 1)::uuid`;
