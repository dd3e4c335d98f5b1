/** Worker options: how this process claims and drives runs. */
export interface WorkerOptions {
  /** Claim and drive runs in this process. Default true. Off on API-only pods. */
  enabled?: boolean;
  /** Runs in flight at once. Default 10. */
  concurrency?: number;
  /** Poll interval while work is flowing. Default 1000 ms; backs off while idle. */
  pollIntervalMs?: number;
  /** Lease length; a worker silent for this long loses its runs. Default 30 s. */
  leaseTtlMs?: number;
  /** Lease renewal period; must be below `leaseTtlMs`. Default 10 s. */
  heartbeatMs?: number;
  /**
   * The fenced transport (default true): a request made inside a command or step body through
   * `fetch`/undici or `node:http`/`https` (axios and other clients built on it) leaves only while this claim's lease
   * holds, checked synchronously where its bytes are handed to the socket. A request refused there
   * never left: the run stops as on a lost lease and the command stays in doubt for the next claim.
   * Off: only the check before the body runs. See README, "What leaves under a lease".
   */
  fencedTransport?: boolean;
  /**
   * How long before the lease's local deadline a request may no longer leave (the fenced transport).
   * Default `leaseTtlMs / 10`; must be below `leaseTtlMs / 3` (where a call renews the lease first).
   */
  wireMarginMs?: number;
  /**
   * Hand-off: while this worker has room, its claims offer it to starts, and a start hands it a due run
   * in the start's own statement (no claim commit before the run begins; docs/ARCHITECTURE.md,
   * "Hand-off"). This is the lease such a run gets until the worker's first write or renewal for it: a
   * worker that dies before then delays the run by this, not `leaseTtlMs`, and the attempt is given back.
   * 0: this worker takes no hand-off (every run is claimed). Default `leaseTtlMs / 6` (5 s), at least
   * 1 s and at most `leaseTtlMs / 2`; must not exceed `leaseTtlMs / 2`.
   */
  handoffLeaseMs?: number;
  /** How long shutdown waits for in-flight steps before releasing their leases. Default 10 s. */
  drainTimeoutMs?: number;
  /**
   * Group commit: while this many step writes (finishes) of this process are in flight, further step
   * writes (finishes) of other runs wait and then go together in one statement, each fenced by its own
   * run (a stale or refused one fails alone). One written while fewer are in flight goes at once,
   * alone. Default 2; 0 sends every one alone (one run per statement, as on a sharded PostgreSQL).
   */
  groupCommit?: number;
  /** Worker identity in the record. Default `host:pid:random`. */
  workerId?: string;
  /**
   * How often the worker renews its presence row (`ai_workers`: which kinds it serves; an idle worker
   * sends no lease heartbeat). A row not renewed for three periods no longer counts. Default 10 s.
   */
  presenceIntervalMs?: number;
  /**
   * How long calls still live when `run()` returns (a race's loser, a step or command whose promise
   * the code dropped after a race) are waited for before they are abandoned: their signals fire, their
   * requests and their calls on the run are refused, and the run finishes without their results (a
   * command stays in doubt in the record). Default 30 s; their own `timeoutMs` may end them sooner.
   */
  lateCallGraceMs?: number;
}
