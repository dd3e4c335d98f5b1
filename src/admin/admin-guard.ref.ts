import { Inject, Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { DelegateGuard } from '../nest/delegate-guard';
import { DURABLE_ADMIN_OPTIONS } from './admin.constants';
import type { ResolvedAdminOptions } from './admin-options.interface';

/**
 * The admin module's `guard`, resolved once (the instance given, the app's provider of that class, or
 * one created with the app's DI): the access guard runs it, the sign-in page checks keys with it. @internal
 */
@Injectable()
export class AdminGuardRef extends DelegateGuard {
  constructor(@Inject(DURABLE_ADMIN_OPTIONS) options: ResolvedAdminOptions, moduleRef: ModuleRef) {
    super(moduleRef, () => options.guard);
  }
}
