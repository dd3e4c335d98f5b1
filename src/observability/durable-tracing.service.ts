import { Inject, Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { DURABLE_EXECUTION_OPTIONS } from '../durable-execution.constants';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { redactErrorMessage } from '../options/redact';
import type * as OTel from '@opentelemetry/api';
import type { DurableObserver, RunAttemptInfo, StepInfo } from '../interfaces/durable-observer.interface';
import { DurableObservers } from '../engine/durable-observers';
import { DURABLE_OBSERVABILITY_OPTIONS } from './observability.constants';
import type { DurableObservabilityOptions } from './observability-options.interface';
import { loadOptional } from '../util/optional-dependency';
import { parseTraceparent } from '../util/trace-context';
import { RunReadStore } from '../store/run-reads.store';

/** Runs whose start trace this process remembers (a run resumed here again costs no read). */
const TRACE_CACHE_SIZE = 10_000;

/** Attempt outcomes that are errors of the run (a park, a drain or a backoff is not). */
const FAILED = new Set(['failed', 'dead_lettered', 'unrecorded', 'lease_lost']);

const key = (r: RunAttemptInfo) => `${r.runId}:${r.epoch}`;

/**
 * OpenTelemetry spans through `@opentelemetry/api` only: `durable.run <kind>` per run attempt (claim to
 * resting point) and `durable.step <name>` per executed step or command, its child. Every attempt's
 * `durable.run` span is a child of the span that was active where `start()` was called (its W3C
 * `traceparent`, stored in the `run.created` event), in whichever process claims it: one trace shows
 * request → run → steps. Both are the active
 * context while they run, so spans of the app's own instrumentation (HTTP, pg) nest under the step when
 * the app installs an SDK with a context manager. Without an SDK every call is the API's no-op.
 */
@Injectable()
export class DurableTracing implements OnModuleInit, OnModuleDestroy {
  private api!: typeof OTel;
  private remove?: () => void;
  private readonly runs = new Map<string, OTel.Span>();
  /** The start trace of each run (null: none), read once per run per process. */
  private readonly started = new Map<string, string | null>();

  constructor(
    private readonly observers: DurableObservers,
    private readonly reads: RunReadStore,
    @Inject(DURABLE_OBSERVABILITY_OPTIONS) private readonly options: DurableObservabilityOptions,
    @Inject(DURABLE_EXECUTION_OPTIONS) private readonly engine: ResolvedDurableOptions,
  ) {}

  onModuleInit(): void {
    if (this.options.tracing === false) return; // a forRootAsync factory switched it off
    this.api = loadOptional<typeof OTel>('@opentelemetry/api', 'DurableObservabilityModule tracing');
    const observer: DurableObserver = {
      wrapRunAttempt: async (info, next) => {
        const span = this.startRun(info, await this.startTrace(info.runId));
        this.runs.set(key(info), span);
        return this.api.context.with(this.api.trace.setSpan(this.api.context.active(), span), next);
      },
      runAttemptEnded: (info, outcome) => {
        const span = this.runs.get(key(info));
        this.runs.delete(key(info));
        if (!span) return;
        span.setAttribute('durable.outcome', outcome);
        if (FAILED.has(outcome)) span.setStatus({ code: this.api.SpanStatusCode.ERROR, message: outcome });
        span.end();
      },
      wrapStep: (info, next) => this.step(info, next),
    };
    this.remove = this.observers.add(observer);
  }

  onModuleDestroy(): void {
    this.remove?.();
    for (const span of this.runs.values()) span.end();
    this.runs.clear();
  }

  private get tracer(): OTel.Tracer {
    // Asked each time: the global provider may be installed after this module started.
    return this.api.trace.getTracer((this.options.tracing || {}).tracerName ?? 'nestjs-durable-execution');
  }

  /**
   * The context of the request that started the run (a remote parent), or the root: no trace then, an
   * invalid stored one, or a read that failed (never a reason to fail the run).
   */
  private async startTrace(runId: string): Promise<OTel.Context> {
    let tp = this.started.get(runId);
    if (tp === undefined) {
      tp = await this.reads.traceparentOf(runId).catch(() => null);
      if (this.started.size >= TRACE_CACHE_SIZE) this.started.clear();
      this.started.set(runId, tp);
    }
    const parent = parseTraceparent(tp);
    const root = this.api.ROOT_CONTEXT;
    return parent ? this.api.trace.setSpanContext(root, parent) : root;
  }

  private startRun(info: RunAttemptInfo, parent: OTel.Context): OTel.Span {
    return this.tracer.startSpan(
      `durable.run ${info.kind}`,
      {
        kind: this.api.SpanKind.INTERNAL,
        attributes: {
          'durable.run_id': info.runId,
          'durable.kind': info.kind,
          'durable.epoch': info.epoch,
          'durable.attempt': info.attempt,
          'durable.worker_id': info.workerId,
          'durable.resumed': info.epoch > 1,
        },
      },
      parent,
    );
  }

  private async step<T>(info: StepInfo, next: () => Promise<T>): Promise<T> {
    const { context, trace, SpanStatusCode } = this.api;
    const parent = this.runs.get(key(info.run));
    const ctx = parent ? trace.setSpan(context.active(), parent) : context.active();
    const span = this.tracer.startSpan(
      `durable.step ${info.name}`,
      {
        attributes: {
          'durable.run_id': info.run.runId,
          'durable.kind': info.run.kind,
          'durable.epoch': info.run.epoch,
          'durable.step.index': info.index,
          'durable.step.name': info.name,
          'durable.step.kind': info.stepKind,
        },
      },
      ctx,
    );
    try {
      const out = await context.with(trace.setSpan(ctx, span), next);
      span.setAttribute('durable.outcome', 'committed');
      return out;
    } catch (err) {
      const parked = (err as Error | null)?.name === 'RunSuspended';
      span.setAttribute('durable.outcome', parked ? 'parked' : 'failed');
      if (!parked) {
        // A step's error message can quote run data: the span gets it through `redact` (as `run.error`),
        // and no stack (its first line is the message again).
        const e = err as Error & { code?: unknown };
        const message = redactErrorMessage(this.engine.redact, String(e?.message ?? err));
        span.recordException({
          name: e?.name ?? 'Error',
          message,
          ...(typeof e?.code === 'string' ? { code: e.code } : {}),
        });
        span.setStatus({ code: SpanStatusCode.ERROR, message });
      }
      throw err;
    } finally {
      span.end();
    }
  }
}
