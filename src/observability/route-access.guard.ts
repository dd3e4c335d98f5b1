import { CanActivate, ExecutionContext, ForbiddenException, Inject, Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { DelegateGuard } from '../nest/delegate-guard';
import { setAdminResponseHeaders } from '../nest/response-headers';
import { DURABLE_OBSERVABILITY_OPTIONS } from './observability.constants';
import type { DurableObservabilityOptions } from './observability-options.interface';

/** Runs `metrics.guard` or `health.guard` when one is set; lets every request through otherwise. */
abstract class RouteAccessGuard implements CanActivate {
  private readonly delegate: DelegateGuard;

  constructor(
    options: DurableObservabilityOptions,
    moduleRef: ModuleRef,
    private readonly route: 'metrics' | 'health',
  ) {
    this.delegate = new DelegateGuard(moduleRef, () => {
      const o = options[route];
      return o ? o.guard : undefined;
    });
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    // First, so that a 401/403 from the guard carries them too.
    setAdminResponseHeaders(context.switchToHttp().getResponse());
    if (!(await this.delegate.allows(context))) {
      throw new ForbiddenException(`The ${this.route} guard refused this request.`);
    }
    return true;
  }
}

/** `metrics.guard` in front of the metrics route. @internal */
@Injectable()
export class MetricsAccessGuard extends RouteAccessGuard {
  constructor(
    @Inject(DURABLE_OBSERVABILITY_OPTIONS) options: DurableObservabilityOptions,
    moduleRef: ModuleRef,
  ) {
    super(options, moduleRef, 'metrics');
  }
}

/** `health.guard` in front of the health route. @internal */
@Injectable()
export class HealthAccessGuard extends RouteAccessGuard {
  constructor(
    @Inject(DURABLE_OBSERVABILITY_OPTIONS) options: DurableObservabilityOptions,
    moduleRef: ModuleRef,
  ) {
    super(options, moduleRef, 'health');
  }
}
