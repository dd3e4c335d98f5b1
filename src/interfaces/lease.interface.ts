import type { RunCursor } from './run.interface';

/** Who holds a running run: the worker, its claim's fencing token, and when the lease ends. */
export interface RunLeaseView {
  runId: string;
  kind: string;
  /** The worker id (`worker.workerId`, by default `<host>:<pid>:<random>`). */
  workerId: string;
  /** The claim's fencing token: every write of that worker carries it. */
  epoch: number;
  /** The WAL timeline of the claim (with `epoch`, the token); null for a claim from before timelines. */
  timeline: number | null;
  /** When the lease ends unless the worker renews it (database clock). */
  leaseExpiresAt: Date;
  /** Where the run stands (`status: 'started'`: a model/tool step or a command may be calling out). */
  cursor: RunCursor;
}

/** One run `LeaseService.releaseWorker` took from a worker known to be gone. */
export interface WorkerReleaseResult {
  runId: string;
  /** `waiting` (any worker resumes it from `availableAt`), or `dead_lettered` when its attempts were spent. */
  status: 'waiting' | 'dead_lettered';
  /** When another worker may claim it: now, or its old lease deadline when a call may be in flight. */
  availableAt: Date;
  /** A reserved command or a started model/tool step: the gone worker may still be calling out. */
  callInFlight: boolean;
  /** Idempotency keys of the commands it had reserved, now `in_doubt` (settled by their policy on resume). */
  inDoubt: string[];
}
