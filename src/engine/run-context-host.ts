import type { WaitForSignalOptions } from '../interfaces/command.interface';
import type { ChildRun, StartChildOptions, WaitForChildOptions } from '../interfaces/child.interface';
import type { WorkflowClass } from '../interfaces/run.interface';

/** The parts of a driven run that the public context exposes. @internal */
export interface RunContextHost {
  readonly runId: string;
  readonly kind: string;
  readonly epoch: number;
  readonly timeline: number;
  readonly attempt: number;
  readonly signal: AbortSignal;
  readonly lease: { assertHeld(what: string): void };
  record<T>(name: string, make: () => T, derive: (seed: Buffer) => T): T;
  progress(item: number, partial: unknown): Promise<void>;
  resumePoint(): { item: number; partial: unknown } | null;
  sleep(ms: number): Promise<void>;
  waitForSignal(name: string, options: WaitForSignalOptions): Promise<unknown>;
  startChild(target: string | WorkflowClass, input: unknown, options: StartChildOptions): Promise<ChildRun>;
  waitForChild(child: ChildRun, options: WaitForChildOptions): Promise<unknown>;
  patched(id: string): boolean;
  deprecatePatch(id: string): void;
  setTags(tags: Record<string, string>): Promise<void>;
  emit(topic: string, data: unknown): Promise<void>;
  continueAsNew(input: unknown): Promise<never>;
}
