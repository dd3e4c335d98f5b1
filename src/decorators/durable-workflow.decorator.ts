import { applyDecorators, Injectable, SetMetadata } from '@nestjs/common';
import { WORKFLOW_METADATA } from '../durable-execution.constants';
import { DurableUsageError } from '../errors/durable-usage.error';
import type { DurableWorkflowOptions, WorkflowMetadata } from '../interfaces/step-options.interface';

/** The largest `concurrency` / `perKeyConcurrency` (one slot row each, per kind or key). */
export const MAX_CONCURRENCY_LIMIT = 10_000;

/** The largest workflow `version` (an int4 column). */
export const MAX_VERSION = 2_147_483_647;

/** What is wrong with a workflow's concurrency options, naming the field; undefined when nothing. */
function limitsProblem(o: DurableWorkflowOptions): string | undefined {
  if (o.version !== undefined && (!Number.isInteger(o.version) || o.version < 1 || o.version > MAX_VERSION))
    return `version must be an integer from 1 to ${MAX_VERSION}, got ${String(o.version)}`;
  for (const field of ['concurrency', 'perKeyConcurrency'] as const) {
    const v = o[field];
    if (v !== undefined && (!Number.isInteger(v) || v < 1 || v > MAX_CONCURRENCY_LIMIT))
      return `${field} must be an integer from 1 to ${MAX_CONCURRENCY_LIMIT}, got ${String(v)}`;
  }
  if (o.concurrencyKey !== undefined && typeof o.concurrencyKey !== 'function')
    return `concurrencyKey must be a function of the input, got ${typeof o.concurrencyKey}`;
  if (o.perKeyConcurrency !== undefined && !o.concurrencyKey)
    return 'perKeyConcurrency needs concurrencyKey (input) => key, to know which runs share a key';
  if (o.rateLimit !== undefined) {
    const r = o.rateLimit as { limit?: unknown; periodMs?: unknown; perKey?: unknown } | null;
    if (!r || typeof r !== 'object') return 'rateLimit must be { limit, periodMs, perKey? }';
    if (!Number.isInteger(r.limit) || (r.limit as number) < 1 || (r.limit as number) > MAX_CONCURRENCY_LIMIT)
      return `rateLimit.limit must be an integer from 1 to ${MAX_CONCURRENCY_LIMIT}, got ${String(r.limit)}`;
    if (!Number.isInteger(r.periodMs) || (r.periodMs as number) < 1 || (r.periodMs as number) > 2_147_483_647)
      return `rateLimit.periodMs must be a positive integer of milliseconds, got ${String(r.periodMs)}`;
    if (r.perKey !== undefined && typeof r.perKey !== 'boolean')
      return `rateLimit.perKey must be a boolean, got ${typeof r.perKey}`;
    if (r.perKey && !o.concurrencyKey)
      return 'rateLimit.perKey needs concurrencyKey (input) => key, to know which runs share a key';
  }
  if (o.debounce !== undefined) {
    const d = o.debounce as { periodMs?: unknown; key?: unknown } | null;
    if (!d || typeof d !== 'object') return 'debounce must be { periodMs, key? }';
    if (!Number.isInteger(d.periodMs) || (d.periodMs as number) < 1 || (d.periodMs as number) > 2_147_483_647)
      return `debounce.periodMs must be a positive integer of milliseconds, got ${String(d.periodMs)}`;
    if (d.key !== undefined && typeof d.key !== 'function')
      return `debounce.key must be a function of the input, got ${typeof d.key}`;
  }
  if (o.holdSlotWhileWaiting !== undefined && typeof o.holdSlotWhileWaiting !== 'boolean')
    return `holdSlotWhileWaiting must be a boolean, got ${typeof o.holdSlotWhileWaiting}`;
  if (o.holdSlotWhileWaiting && o.concurrency === undefined && o.perKeyConcurrency === undefined)
    return 'holdSlotWhileWaiting needs concurrency or perKeyConcurrency (the slots it holds)';
  if (o.concurrencyKey && o.perKeyConcurrency === undefined && !o.rateLimit?.perKey)
    return 'concurrencyKey is given without perKeyConcurrency or rateLimit.perKey (what it limits)';
  return undefined;
}

/**
 * Declares an injectable workflow class for runs of `kind`. The class has `run(input, ctx)`: ordinary
 * async code that is replayed from the top on resume, so it must call steps in a deterministic order.
 * @example
 * ```ts
 * @DurableWorkflow('purchase-order')
 * export class PurchaseOrderWorkflow { async run(input: PoInput, ctx: RunContext) { ... } }
 * ```
 */
export function DurableWorkflow(kind: string, options: DurableWorkflowOptions = {}): ClassDecorator {
  const problem = limitsProblem(options);
  if (problem) throw new DurableUsageError(`@DurableWorkflow('${kind}'): ${problem}`);
  const meta: WorkflowMetadata = { ...options, kind };
  return applyDecorators(Injectable(), SetMetadata(WORKFLOW_METADATA, meta));
}
