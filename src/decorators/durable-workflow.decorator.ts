import { applyDecorators, Injectable, SetMetadata } from '@nestjs/common';
import { WORKFLOW_METADATA } from '../durable-execution.constants';
import type { DurableWorkflowOptions, WorkflowMetadata } from '../interfaces/step-options.interface';

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
  const meta: WorkflowMetadata = { ...options, kind };
  return applyDecorators(Injectable(), SetMetadata(WORKFLOW_METADATA, meta));
}
