/**
 * What the module's init hooks share while the app boots. Nest starts every `onModuleInit` of a module
 * before it awaits any of them, so a registration error (thrown by the explorer) does not stop the
 * database from starting its pool; the database looks here first, one turn later, and does not connect
 * for a boot that already failed (a pool left connecting would keep the process alive).
 * @internal
 */
export class DurableBootState {
  /** The error that failed this boot, once one did. */
  failed: unknown = undefined;
}
