import { Injectable } from '@nestjs/common';
import { DuplicateRegistrationError } from '../errors/duplicate-registration.error';
import { CRON_METADATA } from '../durable-execution.constants';
import type { CronMetadata, WorkflowMetadata } from '../interfaces/step-options.interface';
import type { RunContext } from './run-context';

/** A workflow class instance as the registry holds it. */
export interface RegisteredWorkflow {
  meta: WorkflowMetadata;
  instance: { run(input: unknown, ctx: RunContext): unknown };
  declaredAt: string;
  metatype: unknown;
}

/** Public lookup of the workflows and steps found at bootstrap. */
@Injectable()
export class DurableRegistry {
  private readonly workflows = new Map<string, RegisteredWorkflow>();
  private readonly steps = new Map<string, { declaredAt: string; metatype: unknown }>();

  /** @internal */
  addWorkflow(wf: RegisteredWorkflow): void {
    const existing = this.workflows.get(wf.meta.kind);
    if (existing && existing.metatype !== wf.metatype) {
      throw new DuplicateRegistrationError('Workflow kind', wf.meta.kind, existing.declaredAt, wf.declaredAt);
    }
    this.workflows.set(wf.meta.kind, wf);
  }

  /** @internal */
  addStep(name: string, declaredAt: string, metatype: unknown, what = 'Step name'): void {
    const existing = this.steps.get(name);
    if (existing && existing.metatype !== metatype) {
      throw new DuplicateRegistrationError(what, name, existing.declaredAt, declaredAt);
    }
    this.steps.set(name, { declaredAt, metatype });
  }

  /** The workflow registered for `kind`, if any. */
  getWorkflow(kind: string): RegisteredWorkflow | undefined {
    return this.workflows.get(kind);
  }

  /** The `@DurableCron` schedules of the workflow registered for `kind` (none: []). @internal */
  cronSchedules(kind: string): CronMetadata[] {
    const metatype = this.workflows.get(kind)?.metatype as object | undefined;
    return ((metatype && Reflect.getMetadata(CRON_METADATA, metatype)) as CronMetadata[] | undefined) ?? [];
  }

  /** Every registered workflow kind. */
  kinds(): string[] {
    return [...this.workflows.keys()];
  }

  /** Every registered step name. */
  stepNames(): string[] {
    return [...this.steps.keys()];
  }
}
