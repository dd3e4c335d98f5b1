/**
 * Thrown inside a workflow after the run was parked (approval, in-doubt command, sleep, signal wait):
 * the lease is already released and the park recorded, so the executor only unwinds. Not an error the
 * workflow should catch; if it does, every later step throws it again.
 * @internal
 */
export class RunSuspended extends Error {
  constructor(
    readonly reason: string,
    /** The executor must release the run (fenced) while unwinding: a drain reached a step boundary. */
    readonly releaseOnUnwind = false,
  ) {
    super(`run parked: ${reason}`);
    this.name = 'RunSuspended';
  }
}
