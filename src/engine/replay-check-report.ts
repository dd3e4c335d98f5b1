import { appendFileSync } from 'node:fs';
import type { Logger } from '@nestjs/common';
import type { ReplayCheckResult, ReplayChecker } from './replay-check';

/**
 * The test kit's switch: with `DURABLE_REPLAY_CHECK` set to a file path, every worker of this process
 * (and of the processes it starts, which inherit the variable) replays each run after each attempt
 * ends and appends every check that found a problem to that file, one JSON line each. The test kit's
 * `replayCheckFailures()` reads them; the repository's jest setup fails the test that caused one.
 * @internal
 */
export function replayCheckTarget(): string | undefined {
  const target = process.env.DURABLE_REPLAY_CHECK;
  return target && target !== 'off' ? target : undefined; // 'off': a local run without the check
}

/** Records a failed replay check where the switch says. @internal */
export function reportReplayProblem(target: string, result: ReplayCheckResult, history?: unknown): void {
  appendFileSync(target, `${JSON.stringify({ ...result, pid: process.pid, history })}\n`);
}

/** The replay check of run `runId` as an attempt just left it; a problem is logged and reported. @internal */
export async function checkAfterAttempt(
  checker: ReplayChecker,
  logger: Logger,
  runId: string,
  target: string,
): Promise<void> {
  try {
    const result = await checker.check(runId);
    // A run the engine held for non-determinism diverges on the code that held it: that is its record.
    if (!result.problems.length || result.held) return;
    logger.error(`replay check of run ${runId} (kind '${result.kind}'): ${result.problems.join('; ')}`);
    // The record replayed, for a post-mortem of a failure that does not come again.
    const history = await checker.exportHistory(runId).catch(() => undefined);
    reportReplayProblem(target, result, history);
  } catch (err) {
    logger.warn(`replay check of run ${runId} could not read the run: ${(err as Error).message}`);
  }
}

/**
 * Set by the CLI's `replay` (DURABLE_EXECUTION_REPLAY_ONLY): the app is booted only to replay recorded
 * runs, so its workers, reconciler and retention never start (nothing is claimed, moved or pruned).
 * @internal
 */
export function replayOnly(): boolean {
  return !!process.env.DURABLE_EXECUTION_REPLAY_ONLY;
}
