/**
 * Test-only pause points: where a test can freeze one run between two statements of a transition,
 * or between a write and reading its answer (a zombie: SIGSTOP, a long GC pause, a stalled VM). Inert
 * unless a hook is installed with `setPausePointHook` (from `nestjs-durable-execution/testing`); the
 * cost when inert is one null test.
 * - `after-claim`: a run was claimed, before its replay is read;
 * - `before-write` / `after-write`: around every fenced write of a run (`detail` names it), the
 *   `after-write` one before the answer is used;
 * - `before-call`: before a step body, a command dispatch or a lookup leaves the process (before the
 *   lease is checked, so a freeze here is caught by that check).
 * A schedule's firing has `before-write` / `after-write` points too (`detail` `schedule.fire`, `runId`
 * `$schedule:<name>`, epoch 0).
 * @internal
 */
export type PausePointName = 'after-claim' | 'before-write' | 'after-write' | 'before-call';

/** Where a pause point was reached. */
export interface PausePointInfo {
  point: PausePointName;
  runId: string;
  epoch: number;
  /** The claim's WAL timeline (with `epoch`, its fencing token); absent for a schedule's firing. */
  timeline?: number;
  workerId: string;
  /** What is being written or called (`tool.command_reserved`, `command:charge`, `step:price`, …). */
  detail?: string;
}

/** A hook may return a promise: the run waits for it (its timers, heartbeats and other runs do not). */
export type PausePointHook = (info: PausePointInfo) => void | Promise<void>;

let hook: PausePointHook | null = null;

/** Installs (or with null removes) the process-wide pause hook. Tests only. */
export function setPausePointHook(h: PausePointHook | null): void {
  hook = h;
}

/** Undefined when no hook is installed (the caller skips the await), else the hook's promise. */
export function pausePoint(info: PausePointInfo): Promise<void> | undefined {
  if (!hook) return undefined;
  return Promise.resolve(hook(info));
}

/** The `after-claim` point of a claim (before its replay is read). */
export function afterClaimPoint(
  claim: { id: string; epoch: number; timeline: number },
  workerId: string,
): Promise<void> | undefined {
  const { id: runId, epoch, timeline } = claim;
  return pausePoint({ point: 'after-claim', runId, epoch, timeline, workerId });
}

/** A test hook is installed: a step's commit then keeps its own write (and its pause points). */
export const pauseHooked = (): boolean => hook !== null;
