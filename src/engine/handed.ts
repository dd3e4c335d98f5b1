/**
 * Marks a promise the engine hands to workflow code as handled: one the code never awaits (`void
 * this.audit()`) may reject without crashing the process; one it awaits still rejects there.
 * @internal
 */
export function handed<T>(p: Promise<T>): Promise<T> {
  p.catch(() => undefined);
  return p;
}
