/**
 * One place that tears the demo down however it ends: normal exit, Ctrl-C (SIGINT) or SIGTERM. Clean-ups
 * run last-registered first (workers before the vendors, the database last), then the process exits.
 */
type Cleanup = () => Promise<void> | void;

const cleanups: Cleanup[] = [];
let installed = false;
let running: Promise<void> | undefined;
let signalled: NodeJS.Signals | undefined;

/** The signal that is tearing the process down, if any (errors after it are expected). */
export function shutdownSignal(): NodeJS.Signals | undefined {
  return signalled;
}

/** Runs every registered clean-up once, newest first. */
export function runCleanups(): Promise<void> {
  running ??= (async () => {
    for (const fn of cleanups.splice(0).reverse()) {
      try {
        await fn();
      } catch {
        // keep tearing down
      }
    }
  })().finally(() => (running = undefined));
  return running;
}

/** Registers a clean-up; the returned function unregisters it (after it ran on the normal path). */
export function onShutdown(fn: Cleanup): () => void {
  cleanups.push(fn);
  if (!installed) {
    installed = true;
    for (const sig of ['SIGINT', 'SIGTERM'] as const) {
      process.once(sig, () => {
        signalled = sig;
        process.stderr.write(`\n${sig}: stopping workers and the database...\n`);
        void runCleanups().finally(() => process.exit(sig === 'SIGINT' ? 130 : 143));
      });
    }
  }
  return () => {
    const i = cleanups.indexOf(fn);
    if (i >= 0) cleanups.splice(i, 1);
  };
}
