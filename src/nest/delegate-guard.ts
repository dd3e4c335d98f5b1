import type { CanActivate, ExecutionContext, Type } from '@nestjs/common';
import type { ModuleRef } from '@nestjs/core';
import { isObservable, lastValueFrom } from 'rxjs';

/** A guard given in the options: a class resolved with the app's DI, or an instance. */
export type GuardOption = Type<CanActivate> | CanActivate;

/** Why `guard` is not a CanActivate class or instance, or undefined. `field` names the option. @internal */
export function guardProblem(field: string, guard: unknown): string | undefined {
  if (guard === undefined || guard === null) return undefined;
  if (typeof guard === 'function') return undefined;
  if (typeof guard === 'object' && typeof (guard as CanActivate).canActivate === 'function') return undefined;
  return `${field} must be a CanActivate class or instance`;
}

/**
 * The guard instance: the one given, else the app's provider of that class, else one created with the
 * app's DI (its constructor's dependencies injected). @internal
 */
export async function resolveGuard(moduleRef: ModuleRef, guard: GuardOption): Promise<CanActivate> {
  if (typeof guard !== 'function') return guard;
  try {
    return moduleRef.get(guard, { strict: false });
  } catch {
    return moduleRef.create(guard);
  }
}

/** The guard's verdict, whether it answers with a value, a promise or an observable. @internal */
export async function runGuard(guard: CanActivate, context: ExecutionContext): Promise<boolean> {
  const verdict = guard.canActivate(context);
  return isObservable(verdict) ? await lastValueFrom(verdict) : await verdict;
}

/**
 * Resolves a guard option once, on first use, and runs it. `undefined` lets every request through.
 * @internal
 */
export class DelegateGuard {
  private resolved?: Promise<CanActivate | null>;

  constructor(
    private readonly moduleRef: ModuleRef,
    private readonly guard: () => GuardOption | undefined,
  ) {}

  instance(): Promise<CanActivate | null> {
    return (this.resolved ??= (async () => {
      const g = this.guard();
      return g ? resolveGuard(this.moduleRef, g) : null;
    })());
  }

  async allows(context: ExecutionContext): Promise<boolean> {
    const guard = await this.instance();
    return guard ? runGuard(guard, context) : true;
  }
}
