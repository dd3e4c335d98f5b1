import { RunSuspended } from './run-stop';

/**
 * A promise the engine hands to workflow code (a step's, a command's, a wait's, any `ctx` call's), as
 * that code gets it:
 * - marked as handled: one the code never awaits (`void this.audit()`) may reject without crashing
 *   the process; one it awaits still rejects there;
 * - a run that stopped without an error of its own (a park, a drain, a release, a suspension) never
 *   settles it: the workflow's code is left where it waits and its frame is dropped, so its `catch`
 *   and `finally` blocks run only where plain JavaScript would run them (never for a park). A cancel,
 *   a lost lease or a non-determinism still reject with their typed errors.
 * @internal
 */
export function handed<T>(p: Promise<T>): Promise<T> {
  const out = new Promise<T>((resolve, reject) => {
    p.then(resolve, (err: unknown) => {
      if (!(err instanceof RunSuspended)) reject(err);
    });
  });
  out.catch(() => undefined);
  return out;
}
