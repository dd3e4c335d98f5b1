/**
 * Migrations since the previous release that hold a lock which stops the previous release's writers for
 * a time that grows with a table (docs/UPGRADING.md, "Each migration's lock and cost"), with the tables.
 * The compatibility check (test/upgrade/compatibility.ts) fails a migration that does such work and is
 * not listed here, one listed that does not, and one listed that docs/UPGRADING.md does not name.
 */
export interface DeclaredLock {
  /** The previous release's tables it holds, sorted. */
  tables: string[];
  /** What it does under the lock. */
  why: string;
}

export const DECLARED_LOCKS: Record<string, DeclaredLock> = {
  ConcurrencyLimits1765100000000: {
    tables: ['ai_runs'],
    why: 'rebuilds the claim index with a new predicate, builds ai_runs_limited_idx, checks the new CHECK on every row',
  },
  Debounce1765400000000: {
    tables: ['ai_runs'],
    why: 'builds the unique ai_runs_debounce_idx, checks the new CHECK on every row',
  },
  ChildRuns1765500000000: {
    tables: ['ai_runs'],
    why: 'builds ai_runs_parent_idx, checks the new CHECK on every row',
  },
  PatchMarkers1765800000000: {
    tables: ['ai_checkpoints'],
    why: 'replaces the step_index CHECK and checks it on every row (1766600000000 then drops it)',
  },
  RunTags1765900000000: {
    tables: ['ai_runs'],
    why: 'builds the GIN ai_runs_tags_idx, checks the new CHECK on every row',
  },
  RunTagIndex1766700000000: {
    tables: ['ai_runs'],
    why: 'creates its triggers on ai_runs (SHARE ROW EXCLUSIVE), then reads every run for the tag backfill',
  },
  PartitionedEvents1767000000000: {
    tables: ['ai_events'],
    why: 'renames ai_events, builds its new primary key (id, created_at) and attaches it (one scan for the bound)',
  },
};
