/** Where a run is: the step index and name, and whether that step has started or is done. */
export interface RunCursor {
  step: number;
  name: string | null;
  status: 'pending' | 'started' | 'done';
  attempt: number;
  /** Intra-step position recorded by `ctx.progress(item, partial)`. */
  item: number | null;
  partial?: unknown;
  /**
   * The failed attempts of the step at `step` so far, across claims, and the last one's error in its
   * stored form: each is recorded before the step's retry policy retries it (or fails it), so a claim
   * that resumes the step continues the count, and one that finds `maxAttempts` failures fails the
   * step with that error without running it again. Dropped when the step commits, and when the run
   * ends with the step's failure (a retry of the run runs the step afresh).
   */
  failures?: { count: number; error: Record<string, unknown> };
}
