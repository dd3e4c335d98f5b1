import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import {
  COMMAND_METADATA,
  TRANSACTION_METADATA,
  DURABLE_EXECUTION_OPTIONS,
  STEP_METADATA,
  WORKFLOW_METADATA,
} from '../durable-execution.constants';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import type { CommandMetadata } from '../interfaces/command.interface';
import type { StepMetadata, WorkflowMetadata } from '../interfaces/step-options.interface';
import type { TransactionMetadata } from '../interfaces/transaction.interface';
import { DurableRegistry, RegisteredWorkflow } from '../engine/durable.registry';
import { DurableUsageError } from '../errors/durable-usage.error';
import { DurableBootState } from '../util/boot-state';

/**
 * Scans every provider once at module init for `@DurableWorkflow` classes and `@DurableStep` /
 * `@IdempotentCommand` methods, and fills the registry. Request-scoped providers are skipped with a
 * warning: a run outlives any request.
 * @internal
 */
@Injectable()
export class DurableExplorer implements OnModuleInit {
  private readonly logger = new Logger('DurableExecution');

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly registry: DurableRegistry,
    @Inject(DURABLE_EXECUTION_OPTIONS) private readonly options: ResolvedDurableOptions,
    private readonly boot: DurableBootState,
  ) {}

  /** Durable calls with no timeout at all (`defaultTimeoutMs: 0` and none of their own). */
  private readonly untimed: string[] = [];

  onModuleInit(): void {
    try {
      for (const wrapper of this.discovery.getProviders()) this.explore(wrapper);
    } catch (err) {
      this.boot.failed = err;
      throw err;
    }
    if (this.untimed.length)
      this.logger.warn(
        `${this.untimed.join(', ')} ha${this.untimed.length === 1 ? 's' : 've'} no timeout (defaultTimeoutMs is 0): ` +
          `a call that never answers holds its run until it is cancelled. Give each a timeoutMs, or set defaultTimeoutMs.`,
      );
  }

  /** Notes a call that would wait for ever for a body that never answers. */
  private timed(what: string, timeoutMs: number | undefined): void {
    if ((timeoutMs ?? this.options.defaultTimeoutMs) === 0 && timeoutMs === undefined)
      this.untimed.push(what);
  }

  private explore(wrapper: InstanceWrapper): void {
    const { instance, metatype } = wrapper;
    if (!instance || typeof instance !== 'object') return;
    if (!metatype) return this.replaced(wrapper);
    const wfMeta = Reflect.getMetadata(WORKFLOW_METADATA, metatype) as WorkflowMetadata | undefined;
    const proto = Object.getPrototypeOf(instance);
    const methods = this.scanner.getAllMethodNames(proto);
    const stepMethods = methods.filter((m) => isDurableMethod(proto[m]));
    if (!wfMeta && !stepMethods.length) return;
    if (!wrapper.isDependencyTreeStatic()) {
      this.logger.warn(
        `${wrapper.name} is request-scoped; durable workflows and steps must be singletons. Skipped.`,
      );
      return;
    }
    if (wfMeta) {
      if (typeof (instance as { run?: unknown }).run !== 'function') {
        throw new DurableUsageError(
          `@DurableWorkflow('${wfMeta.kind}') on ${String(wrapper.name)} needs a run(input, ctx) method.`,
        );
      }
      this.registry.addWorkflow({
        meta: wfMeta,
        instance: instance as RegisteredWorkflow['instance'],
        declaredAt: String(wrapper.name),
        metatype,
      });
    }
    for (const m of stepMethods) {
      const step = Reflect.getMetadata(STEP_METADATA, proto[m]) as StepMetadata | undefined;
      if (step) this.registry.addStep(step.name, step.declaredAt, metatype);
      if (step) this.timed(`@DurableStep ${step.name}`, step.timeoutMs);
      if (step?.budget !== undefined && !(step.budget in this.options.budgets))
        throw new DurableUsageError(
          `@DurableStep on ${step.declaredAt} draws on budget '${step.budget}', which the module's budgets do not declare (${Object.keys(this.options.budgets).join(', ') || 'none'}): add it to DurableExecutionModule.forRoot({ budgets })`,
        );
      const tx = Reflect.getMetadata(TRANSACTION_METADATA, proto[m]) as TransactionMetadata | undefined;
      if (tx) this.registry.addStep(tx.name, tx.declaredAt, metatype);
      if (tx) this.timed(`@DurableTransaction ${tx.name}`, tx.timeoutMs);
      const cmd = Reflect.getMetadata(COMMAND_METADATA, proto[m]) as CommandMetadata | undefined;
      if (!cmd) continue;
      this.registry.addStep(`command:${cmd.name}`, cmd.declaredAt, metatype, 'Command name');
      this.timed(`@IdempotentCommand ${cmd.name}`, cmd.timeoutMs);
      const lookup = (instance as { lookupCommand?: unknown }).lookupCommand;
      if (cmd.inDoubt === 'lookup' && typeof lookup !== 'function') {
        throw new DurableUsageError(
          `@IdempotentCommand('${cmd.name}') on ${cmd.declaredAt} uses inDoubt: 'lookup', so ${String(wrapper.name)} ` +
            `must implement CommandLookup.lookupCommand(command, idempotencyKey); or choose 'retry-with-key' or 'manual'.`,
        );
      }
    }
  }

  /**
   * A provider given as a value under a durable class's token (`overrideProvider(Steps).useValue(mock)`
   * in a test): its methods are the value's, not the decorated ones, so they run as plain calls: no
   * checkpoint, no idempotency key, run again on every replay; a workflow so replaced is not
   * registered at all. Said loudly at boot, naming what lost its durability.
   */
  private replaced(wrapper: InstanceWrapper): void {
    const token = wrapper.token;
    if (typeof token !== 'function' || !token.prototype) return;
    const kind = (Reflect.getMetadata(WORKFLOW_METADATA, token) as WorkflowMetadata | undefined)?.kind;
    const proto = token.prototype as Record<string, unknown>;
    const durable = this.scanner.getAllMethodNames(proto).filter((m) => isDurableMethod(proto[m]));
    const value = wrapper.instance as Record<string, unknown>;
    const plain = durable.filter((m) => value[m] !== proto[m] && !isDurableMethod(value[m]));
    if (kind !== undefined)
      this.logger.warn(
        `${token.name} (@DurableWorkflow('${kind}')) is provided as a value (useValue/overrideProvider): it is not ` +
          'registered, and its runs wait for a worker that has the class. Provide the class (useClass) to run them here.',
      );
    if (plain.length)
      this.logger.warn(
        `${token.name} is provided as a value (useValue/overrideProvider): ${plain.join(', ')} ` +
          `${plain.length === 1 ? 'is a plain call' : 'are plain calls'} now, not durable (no checkpoint, no idempotency key; ` +
          'run again on every replay). Mock what they call instead (the client, the API), or override with a subclass (useClass).',
      );
  }
}

/** A method decorated with `@DurableStep`, `@IdempotentCommand` or `@DurableTransaction`. */
function isDurableMethod(f: unknown): boolean {
  return (
    typeof f === 'function' &&
    (Reflect.hasMetadata(STEP_METADATA, f) ||
      Reflect.hasMetadata(COMMAND_METADATA, f) ||
      Reflect.hasMetadata(TRANSACTION_METADATA, f))
  );
}
