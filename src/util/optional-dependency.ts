import { MissingDependencyError } from '../errors/missing-dependency.error';

/**
 * Loads an optional peer dependency when a feature that needs it is switched on, so that importing the
 * library never requires prom-client, @opentelemetry/api, @nestjs/terminus or @nestjs/swagger.
 * @internal
 */
export function loadOptional<T>(packageName: string, feature: string): T {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(packageName) as T;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND') {
      throw new MissingDependencyError(packageName, feature);
    }
    throw err;
  }
}

/** The package, or undefined when it is not installed. @internal */
export function tryLoadOptional<T>(packageName: string): T | undefined {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(packageName) as T;
  } catch {
    return undefined;
  }
}

/**
 * The package when this process has already loaded it (from where this library resolves it), else
 * undefined: it is never loaded here. @internal
 */
export function loadedOptional<T>(packageName: string): T | undefined {
  let path: string;
  try {
    path = require.resolve(packageName);
  } catch {
    return undefined;
  }
  return require.cache[path] ? tryLoadOptional<T>(packageName) : undefined;
}
