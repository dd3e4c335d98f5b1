/** The limit a held-back run waits on (`RunView.limitedBy`). */
export interface LimitScope {
  /** `concurrency`: no slot of the kind or key is free; `rate`: no rate token is free yet. */
  limit: 'concurrency' | 'rate';
  /** The kind whose limit it is. */
  kind: string;
  /** For a per-key limit: the run's concurrency key. */
  key?: string;
  /** The scope as stored, as `RunStats.heldBack` and the `durable_runs_held_back` metric name it. */
  scope: string;
}
