/**
 * The external writes of a purchase order, each an `@IdempotentCommand`: the method receives a
 * deterministic idempotency key (`run_<id>:step_<n>:<name>`) and sends it to the vendor, the module
 * reserves the command before the call and records the outcome after it, and a replay returns the
 * recorded result without calling. If a crash hides the outcome (the call went out, nothing was
 * recorded), the resumed run asks the vendor by key (`inDoubt: 'lookup'`) before calling again.
 */
import { Inject, Injectable } from '@nestjs/common';
import { CommandContext, CommandLookup, IdempotentCommand, LookupResult } from '../../src'; // in an app: 'nestjs-durable-execution'
import type { ServiceSettings } from './config';

export const SERVICE_SETTINGS = Symbol('SERVICE_SETTINGS');

/** A vendor answered with an error status. 4xx is permanent (`retryable: false`), 5xx is not. */
export class VendorError extends Error {
  readonly retryable: boolean;
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'VendorError';
    this.retryable = status >= 500;
  }
}

/** Thin JSON client for the vendors (loopback in the demo). */
@Injectable()
export class VendorApi {
  constructor(@Inject(SERVICE_SETTINGS) private readonly settings: ServiceSettings) {}

  async call<T>(
    method: 'GET' | 'POST' | 'PUT',
    path: string,
    body?: unknown,
    opts: { idempotencyKey?: string; signal?: AbortSignal } = {},
  ): Promise<T> {
    const res = await fetch(`${this.settings.vendorsUrl}${path}`, {
      method,
      headers: {
        'content-type': 'application/json',
        ...(opts.idempotencyKey ? { 'idempotency-key': opts.idempotencyKey } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: opts.signal,
    });
    if (!res.ok)
      throw new VendorError(res.status, `${method} ${path}: HTTP ${res.status} ${await res.text()}`);
    return (await res.json()) as T;
  }

  /** A side-effecting POST: the command's key goes in the `Idempotency-Key` header. */
  command<T>(path: string, body: unknown, ctx: CommandContext | undefined): Promise<T> {
    if (!ctx?.idempotencyKey) throw new Error(`POST ${path} needs an idempotency key`);
    return this.call<T>('POST', path, body, ctx);
  }

  /** Did the vendor apply the call with this key? (404 = never saw it.) */
  async lookup(path: string): Promise<LookupResult> {
    const res = await fetch(`${this.settings.vendorsUrl}${path}`);
    if (res.status === 404) return { found: false };
    if (!res.ok) throw new VendorError(res.status, `GET ${path}: HTTP ${res.status}`);
    return (await res.json()) as LookupResult;
  }
}

export interface CreditDecision {
  enquiryId: string;
  score: number;
  approved: boolean;
  feeEur: number;
}

/** The credit bureau: €0.40 per enquiry and a hard enquiry on the buyer's credit file. */
@Injectable()
export class CreditBureau implements CommandLookup {
  constructor(private readonly api: VendorApi) {}

  @IdempotentCommand({ name: 'credit_check', inDoubt: 'lookup' })
  check(
    args: { orderRef: string; buyerId: string; amountCents: number },
    ctx?: CommandContext,
  ): Promise<CreditDecision> {
    return this.api.command('/credit-checks', args, ctx);
  }

  lookupCommand(_command: string, key: string): Promise<LookupResult> {
    return this.api.lookup(`/credit-checks/${encodeURIComponent(key)}`);
  }
}

/** The card processor. */
@Injectable()
export class PaymentGateway implements CommandLookup {
  constructor(private readonly api: VendorApi) {}

  @IdempotentCommand({ name: 'charge_card', inDoubt: 'lookup' })
  charge(
    args: { orderRef: string; buyerId: string; amountCents: number },
    ctx?: CommandContext,
  ): Promise<{ chargeId: string; amountCents: number; currency: string }> {
    return this.api.command('/charges', args, ctx);
  }

  lookupCommand(_command: string, key: string): Promise<LookupResult> {
    return this.api.lookup(`/charges/${encodeURIComponent(key)}`);
  }
}

/** The freight carrier. */
@Injectable()
export class Carrier implements CommandLookup {
  constructor(private readonly api: VendorApi) {}

  @IdempotentCommand({ name: 'book_shipment', inDoubt: 'lookup' })
  book(
    args: { orderRef: string; supplierId: string; lineItems: number },
    ctx?: CommandContext,
  ): Promise<{ shipmentId: string; carrier: string; etaDays: number }> {
    return this.api.command('/shipments', args, ctx);
  }

  lookupCommand(_command: string, key: string): Promise<LookupResult> {
    return this.api.lookup(`/shipments/${encodeURIComponent(key)}`);
  }
}

/** E-mail to the buyer and the supplier's portal: both are external writes too. */
@Injectable()
export class Notifier implements CommandLookup {
  constructor(private readonly api: VendorApi) {}

  @IdempotentCommand({ name: 'notify_buyer', inDoubt: 'lookup' })
  notifyBuyer(
    args: { orderRef: string; buyerId: string; chargeId: string; shipmentId: string },
    ctx?: CommandContext,
  ): Promise<{ messageId: string }> {
    return this.api.command('/notifications', { ...args, to: 'buyer' }, ctx);
  }

  @IdempotentCommand({ name: 'notify_supplier', inDoubt: 'lookup' })
  notifySupplier(
    args: { orderRef: string; supplierId: string; supplierOrderNo: string; totalCents: number },
    ctx?: CommandContext,
  ): Promise<{ messageId: string }> {
    return this.api.command('/notifications', { ...args, to: 'supplier' }, ctx);
  }

  lookupCommand(_command: string, key: string): Promise<LookupResult> {
    return this.api.lookup(`/notifications/${encodeURIComponent(key)}`);
  }
}
