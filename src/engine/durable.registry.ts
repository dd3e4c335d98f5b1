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

/** The version a workflow class runs (`@DurableWorkflow(kind, { version })`, default 1). */
export const versionOf = (meta: { version?: number }): number => meta.version ?? 1;

/** Public lookup of the workflows and steps found at bootstrap. */
@Injectable()
export class DurableRegistry {
  /** Kind → version → class; each kind's versions newest first. */
  private readonly workflows = new Map<string, Map<number, RegisteredWorkflow>>();
  private readonly steps = new Map<string, { declaredAt: string; metatype: unknown }>();

  /** @internal */
  addWorkflow(wf: RegisteredWorkflow): void {
    const versions = this.workflows.get(wf.meta.kind) ?? new Map<number, RegisteredWorkflow>();
    const version = versionOf(wf.meta);
    const existing = versions.get(version);
    if (existing && existing.metatype !== wf.metatype) {
      const what = version === 1 ? 'Workflow kind' : `Version ${version} of workflow kind`;
      throw new DuplicateRegistrationError(what, wf.meta.kind, existing.declaredAt, wf.declaredAt);
    }
    versions.set(version, wf);
    this.workflows.set(wf.meta.kind, new Map([...versions].sort(([a], [b]) => b - a)));
  }

  /** @internal */
  addStep(name: string, declaredAt: string, metatype: unknown, what = 'Step name'): void {
    const existing = this.steps.get(name);
    if (existing && existing.metatype !== metatype) {
      throw new DuplicateRegistrationError(what, name, existing.declaredAt, declaredAt);
    }
    this.steps.set(name, { declaredAt, metatype });
  }

  /**
   * The workflow class registered for `version` of `kind` (without `version`: its newest version), if
   * any. Kind-wide options (limits, keys, debounce, schedules) are read from the newest.
   */
  getWorkflow(kind: string, version?: number): RegisteredWorkflow | undefined {
    const versions = this.workflows.get(kind);
    if (!versions) return undefined;
    return version === undefined ? versions.values().next().value : versions.get(version);
  }

  /** The versions of `kind` registered here, newest first ([] when none). */
  versions(kind: string): number[] {
    return [...(this.workflows.get(kind)?.keys() ?? [])];
  }

  /** Every (kind, version) registered here, as two parallel arrays (the claim's parameters). @internal */
  kindVersions(): { kinds: string[]; versions: number[] } {
    const kinds: string[] = [];
    const versions: number[] = [];
    for (const [kind, byVersion] of this.workflows)
      for (const v of byVersion.keys()) {
        kinds.push(kind);
        versions.push(v);
      }
    return { kinds, versions };
  }

  /** The `@DurableCron` schedules of the newest workflow registered for `kind` (none: []). @internal */
  cronSchedules(kind: string): CronMetadata[] {
    const metatype = this.getWorkflow(kind)?.metatype as object | undefined;
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
