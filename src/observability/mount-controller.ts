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
