import { InvalidOptionsError } from '../errors/invalid-options.error';
import { MountMismatchError } from '../errors/mount-mismatch.error';
import { guardProblem } from '../nest/delegate-guard';
import { loadOptional, tryLoadOptional } from '../util/optional-dependency';
import { routePathProblem, trimPath } from '../nest/mount-controller';
import type {
  DurableObservabilityOptions,
  DurableObservabilityRoutes,
} from './observability-options.interface';

/** What the module mounts and registers, decided when it is built. @internal */
export interface ObservabilityMount {
  /** The metrics route, or false for none. */
  metrics: string | false;
  /** The health route, or false for none. */
  health: string | false;
  /** Whether the tracing provider is registered. */
  tracing: boolean;
}

/** Where the checks report: the module's name and the prefix of its option names. @internal */
export interface OptionsOwner {
  moduleName: string;
  /** `''` standalone, `'observability.'` inside the admin module. */
  prefix: string;
}

/** The mount from forRoot's options or forRootAsync's routes; refuses route patterns. @internal */
export function observabilityMount(
  o: DurableObservabilityRoutes | DurableObservabilityOptions,
  healthDefault: string,
  owner: OptionsOwner,
): ObservabilityMount {
  const problems = [
    routePathProblem(`${owner.prefix}metrics.path`, o.metrics ? o.metrics.path : undefined),
    routePathProblem(`${owner.prefix}health.path`, o.health ? o.health.path : undefined),
  ].filter((p): p is string => p !== undefined);
  if (problems.length) throw new InvalidOptionsError(problems.map((p) => `${owner.moduleName}: ${p}`));
  const tracing = o.tracing;
  return {
    metrics: o.metrics === false ? false : trimPath(o.metrics?.path ?? 'metrics'),
    health: o.health === false ? false : trimPath(o.health?.path ?? healthDefault),
    // On by default only when the API package is there; asked for explicitly, it must be.
    tracing: tracing !== false && (!!tracing || tryLoadOptional('@opentelemetry/api') !== undefined),
  };
}

/**
 * Checks options against the module as it was built: guards must be CanActivate, and a route the
 * options move or switch (`metrics.path`, `health.path`, `metrics: false`, `health: false`) is a
 * `MountMismatchError` (a forRootAsync factory cannot move routes). Returns the options. @internal
 */
export function checkObservabilityOptions(
  o: DurableObservabilityOptions | undefined,
  mount: ObservabilityMount,
  owner: OptionsOwner,
): DurableObservabilityOptions {
  const options = o ?? {};
  const p = owner.prefix;
  const problems = [
    guardProblem(`${p}metrics.guard`, options.metrics ? options.metrics.guard : undefined),
    guardProblem(`${p}health.guard`, options.health ? options.health.guard : undefined),
  ].filter((x): x is string => x !== undefined);
  if (problems.length) throw new InvalidOptionsError(problems.map((x) => `${owner.moduleName}: ${x}`));
  for (const name of ['metrics', 'health'] as const) {
    const given = options[name];
    if (given === undefined) continue;
    const mounted = mount[name];
    if ((given === false) !== (mounted === false)) {
      throw new MountMismatchError(owner.moduleName, `${p}${name}`, mounted !== false, given !== false);
    }
    if (given && given.path !== undefined && trimPath(String(given.path)) !== mounted) {
      throw new MountMismatchError(owner.moduleName, `${p}${name}.path`, mounted, given.path);
    }
  }
  if (options.tracing && !mount.tracing) {
    // Explicitly asked for: the package must be there (this throws when it is not).
    loadOptional('@opentelemetry/api', `${owner.moduleName} tracing`);
    throw new MountMismatchError(owner.moduleName, `${p}tracing`, false, options.tracing);
  }
  return options;
}
