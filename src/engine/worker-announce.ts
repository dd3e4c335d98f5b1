import type { Logger } from '@nestjs/common';
import type { ClaimedRun } from '../store/run-state/claim-runs';
import type { RunStateStore } from '../store/run-state/run-state.store';

/**
 * The worker's start-up lines: who it is and which kinds it runs, then (one query, in the background)
 * the kinds of unfinished runs it does not run. A run of a kind no worker registers, say after a
 * workflow was renamed, waits forever: this warning is where an operator first sees it.
 * @internal
 */
export function announceWorker(
  logger: Logger,
  store: Pick<RunStateStore, 'otherKinds'>,
  id: string,
  concurrency: number,
  registered: Iterable<string>,
): void {
  const kinds = [...registered].sort();
  logger.log(
    `worker ${id} up: concurrency ${concurrency}, kinds ${kinds.length ? kinds.join(', ') : '(none registered)'}`,
  );
  store.otherKinds(kinds).then(
    (others) => {
      if (!others.length) return;
      const list = others.map((o) => `${o.kind} (${o.runs} run${o.runs === 1 ? '' : 's'})`).join(', ');
      logger.warn(
        `unfinished runs of kinds worker ${id} does not run: ${list}. If no worker registers a kind ` +
          '(renamed or removed?), its runs wait forever: register it again, or cancel them.',
      );
    },
    () => undefined, // the database may not be up yet: the warning is best effort
  );
}

/** A run this worker parked until a near time (sleep, signal timeout) is claimed right when it is due. @internal */
export function wakeWhenDue(due: Date | null, nudge: () => void): void {
  if (!due) return;
  const ms = due.getTime() - Date.now();
  if (ms > 5 * 60_000) return; // far away: the poll will find it
  setTimeout(nudge, Math.max(0, ms) + 5).unref();
}

/** How long after bootstrap a worker looks for a SIGTERM listener (`enableShutdownHooks` may come after init). */
export const SHUTDOWN_HOOKS_CHECK_MS = 2000;

/**
 * Warns once when, shortly after bootstrap, nothing in the process listens for SIGTERM: without
 * `app.enableShutdownHooks()` a deploy's SIGTERM kills the worker without a drain, and its runs wait out
 * their leases before another worker resumes them. @internal
 */
export function warnWithoutShutdownHooks(logger: Logger): NodeJS.Timeout {
  return setTimeout(() => {
    if (process.listenerCount('SIGTERM') > 0) return;
    logger.warn(
      'worker: nothing in this process listens for SIGTERM: call app.enableShutdownHooks() where the app is ' +
        'created. Without it a deploy kills this worker without a drain, and its runs wait for their leases ' +
        '(worker.leaseTtlMs) to run out before another worker resumes them.',
    );
  }, SHUTDOWN_HOOKS_CHECK_MS).unref();
}

/**
 * The end of a drain, in one line: how many runs rested within the grace, how many were handed back
 * (or that none was in flight). @internal
 */
export function announceDrain(
  logger: Logger,
  workerId: string,
  inFlight: number,
  left: number,
  live: number,
): void {
  if (!inFlight) {
    logger.log(`worker ${workerId} drained: no run was in flight`);
    return;
  }
  logger.log(
    `worker ${workerId} drained: ${inFlight - left} of ${inFlight} run(s) reached a resting point in the grace, ` +
      `${left} handed back (${live} due at their lease's end: a call was still in flight)`,
  );
}

/**
 * A claim of a run that ran before (epoch > 1), in one line: a takeover (`log`: the attempt before made
 * no progress: its worker died or froze past its lease, or it failed and was retried; or the claim
 * before lost its lease, progress or not) or a plain resume after a park or a drain (`debug`: a busy
 * system resumes runs all the time). @internal
 */
export function announceResume(
  logger: Logger,
  claim: Pick<ClaimedRun, 'id' | 'kind' | 'epoch' | 'attempts' | 'maxAttempts' | 'takenOver'>,
  workerId: string,
): void {
  if (claim.epoch <= 1) return;
  const what = `run ${claim.id} (kind '${claim.kind}')`;
  if (claim.attempts > 1) {
    logger.log(
      `${what} taken over by worker ${workerId} at epoch ${claim.epoch}: attempt ${claim.attempts} of ${claim.maxAttempts} (the attempt before made no progress: a lost lease, a crash or an error)`,
    );
  } else if (claim.takenOver) {
    logger.log(
      `${what} taken over by worker ${workerId} at epoch ${claim.epoch}: the claim before lost its lease (its worker died, froze or was released); it resumes from its last checkpoint`,
    );
  } else {
    logger.debug(`${what} resumed by worker ${workerId} at epoch ${claim.epoch}`);
  }
}
