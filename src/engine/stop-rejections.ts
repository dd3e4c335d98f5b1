/** Marks an error the engine raised into workflow code because it stopped the run. */
const ENGINE_STOP = Symbol.for('nestjs-durable-execution.engine-stop');

/** Tags `error` as a stop the engine already recorded (see `installStopRejectionGuard`). @internal */
export function markEngineStop<E extends Error>(error: E): E {
  if (!(ENGINE_STOP in error)) Object.defineProperty(error, ENGINE_STOP, { value: true, enumerable: false });
  return error;
}

function isEngineStop(reason: unknown): boolean {
  return !!reason && typeof reason === 'object' && ENGINE_STOP in reason;
}

let installed = 0;
const onUnhandled = (reason: unknown): void => {
  if (isEngineStop(reason)) return; // the run already ends as the engine decided: nothing to crash for
  // Anything else behaves as without this listener: Node's default turns it into an uncaught exception.
  if (process.listenerCount('unhandledRejection') === 1) throw reason;
};

/**
 * While a worker runs: a promise of the workflow's own code (an async helper it never awaited, `void
 * this.auditLater()`) that rejects with a stop the engine raised into it (the run was cancelled, lost
 * its lease, or failed for a dangling call) must not crash the process and every run in it. Other
 * unhandled rejections keep Node's behaviour. Returns the uninstall. @internal
 */
export function installStopRejectionGuard(): () => void {
  if (installed++ === 0) process.on('unhandledRejection', onUnhandled);
  let done = false;
  return () => {
    if (done) return;
    done = true;
    if (--installed === 0) process.off('unhandledRejection', onUnhandled);
  };
}
