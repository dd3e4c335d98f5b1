import { CanActivate, ExecutionContext, ForbiddenException, UnauthorizedException } from '@nestjs/common';
import { timingSafeEqual } from 'node:crypto';
import { InvalidOptionsError } from '../errors/invalid-options.error';
import { isDurableAdminAction } from './admin-access.guard';
import { DURABLE_OPERATOR } from './admin.constants';

/** One key's holder: the name recorded as `by`, and whether they may only read. */
export interface ApiKeyHolder {
  operator: string;
  readOnly?: boolean;
}

/** Options of `ApiKeyAdminGuard`. */
export interface ApiKeyAdminGuardOptions {
  /** API key → who holds it (a name, or `{ operator, readOnly }`). Load the keys from your secrets. */
  keys: Record<string, string | ApiKeyHolder>;
  /** Header carrying the key. Default `x-api-key`; `Authorization: Bearer <key>` is accepted too. */
  header?: string;
}

/**
 * A ready guard for the admin module: no key → 401, an unknown key → 401, a read-only key on an action →
 * 403. The holder's name is what the event trail records as `by`.
 * @example
 * ```ts
 * DurableAdminModule.forRoot({ guard: new ApiKeyAdminGuard({ keys: { [process.env.OPS_KEY!]: 'ops-oncall' } }) })
 * ```
 */
export class ApiKeyAdminGuard implements CanActivate {
  private readonly holders: Array<{ key: Buffer; holder: ApiKeyHolder }>;
  private readonly header: string;

  constructor(options: ApiKeyAdminGuardOptions) {
    const entries = Object.entries(options?.keys ?? {});
    const weak = entries.filter(([k]) => k.length < 16 || k === 'undefined').map(([, h]) => h);
    if (!entries.length || weak.length) {
      throw new InvalidOptionsError([
        'ApiKeyAdminGuard: keys must be a non-empty map of keys of at least 16 characters (is a secret unset?)',
      ]);
    }
    this.holders = entries.map(([k, h]) => ({
      key: Buffer.from(k),
      holder: typeof h === 'string' ? { operator: h } : h,
    }));
    this.header = (options.header ?? 'x-api-key').toLowerCase();
  }

  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest();
    const headers = req?.headers ?? {};
    const bearer = /^Bearer\s+(.+)$/i.exec(String(headers.authorization ?? ''))?.[1];
    const given = headers[this.header] ?? bearer;
    if (typeof given !== 'string' || !given) {
      throw new UnauthorizedException(`An API key is required (${this.header} header).`);
    }
    const holder = this.find(Buffer.from(given));
    if (!holder) throw new UnauthorizedException('Unknown API key.');
    if (holder.readOnly && isDurableAdminAction(context)) {
      throw new ForbiddenException(`${holder.operator} may read runs but not act on them.`);
    }
    req[DURABLE_OPERATOR] = holder.operator;
    return true;
  }

  /** Compares against every key in constant time per key, so timing tells nothing about a near miss. */
  private find(given: Buffer): ApiKeyHolder | undefined {
    let found: ApiKeyHolder | undefined;
    for (const { key, holder } of this.holders) {
      if (key.length === given.length && timingSafeEqual(key, given) && !found) found = holder;
    }
    return found;
  }
}
