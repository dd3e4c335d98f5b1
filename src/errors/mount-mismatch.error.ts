import { DurableExecutionError } from './durable-execution.error';

/**
 * A `forRootAsync` factory returned a route option that differs from the one the module was built
 * with. Routes are registered when the module is built, before any factory runs, so a mount path (the
 * admin `path`, `metrics.path`, `health.path`) and whether a route exists at all (`login`, `metrics`,
 * `health`, `observability`) are given in `forRootAsync`'s own options; the factory may leave them out
 * or repeat them, not change them.
 */
export class MountMismatchError extends DurableExecutionError {
  declare readonly code: 'DURABLE_MOUNT_MISMATCH';

  constructor(
    /** The module whose factory returned it, e.g. `DurableAdminModule`. */
    public readonly moduleName: string,
    /** The option, e.g. `path` or `observability.metrics.path`. */
    public readonly option: string,
    /** What the module was built with (mounted). */
    public readonly mounted: unknown,
    /** What the factory returned. */
    public readonly returned: unknown,
  ) {
    super(
      'DURABLE_MOUNT_MISMATCH',
      `${moduleName}.forRootAsync: the factory returned ${option} = ${show(returned)}, but the routes were ` +
        `mounted when the module was built, with ${option} = ${show(mounted)}. Give ${option} in ` +
        `forRootAsync's own options (next to useFactory), not in the factory's result: routes cannot move ` +
        'after the module is built.',
    );
  }
}

function show(v: unknown): string {
  return v === undefined ? 'undefined' : JSON.stringify(v);
}
