import { Controller, Type } from '@nestjs/common';

/**
 * A subclass of `base` registered as a controller at `path`. The route prefix is chosen at `forRoot`
 * time, and each `forRoot` gets its own class, so two apps in one process can mount at different paths.
 * Guards, pipes, filters and routes declared on `base` are inherited. @internal
 */
export function mountController<T extends Type<object>>(base: T, path: string): T {
  const mounted = class extends base {};
  Object.defineProperty(mounted, 'name', { value: base.name });
  Controller(path)(mounted);
  return mounted;
}

/** `'/durable/'` → `'durable'`. @internal */
export function trimPath(path: string): string {
  return path.replace(/^\/+|\/+$/g, '');
}

/**
 * Why `value` cannot be a mount path, or undefined. A path is literal: route patterns (`*`, `:param`,
 * `(...)`, `?`) would widen what the mount matches, so they are refused, as are `#`, spaces and
 * control characters. `field` names the option in the message. @internal
 */
export function routePathProblem(field: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  // eslint-disable-next-line no-control-regex
  if (typeof value !== 'string' || /[*:()?#{}[\]+!\s\x00-\x1f]/.test(value)) {
    return `${field} must be a plain URL path, without wildcards or route patterns (*, :, (, ?) (got ${JSON.stringify(value)})`;
  }
  return undefined;
}
