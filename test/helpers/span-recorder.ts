import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import {
  Attributes,
  Context,
  ContextManager,
  ROOT_CONTEXT,
  Span,
  SpanContext,
  SpanOptions,
  SpanStatus,
  Tracer,
  TracerProvider,
  context,
  trace,
} from '@opentelemetry/api';

/** A span as recorded in memory (the API's interface, no SDK). */
export class RecordedSpan implements Span {
  attributes: Attributes;
  status: SpanStatus = { code: 0 };
  ended = false;
  exceptions: unknown[] = [];
  constructor(
    readonly name: string,
    readonly ctx: SpanContext,
    readonly parentSpanId: string | undefined,
    attributes: Attributes = {},
  ) {
    this.attributes = { ...attributes };
  }
  spanContext = () => this.ctx;
  setAttribute = (k: string, v: Attributes[string]) => ((this.attributes[k] = v), this);
  setAttributes = (a: Attributes) => (Object.assign(this.attributes, a), this);
  addEvent = () => this;
  addLink = () => this;
  addLinks = () => this;
  setStatus = (s: SpanStatus) => ((this.status = s), this);
  updateName = () => this;
  end = () => void (this.ended = true);
  isRecording = () => !this.ended;
  recordException = (e: unknown) => void this.exceptions.push(e);
}

/** An in-memory span recorder installed as the global tracer provider through @opentelemetry/api. */
export class SpanRecorder implements TracerProvider, Tracer {
  spans: RecordedSpan[] = [];
  getTracer = () => this;
  startSpan(name: string, options: SpanOptions = {}, ctx = context.active()): Span {
    const parent = trace.getSpanContext(ctx);
    const id = (n: number) => randomBytes(n).toString('hex');
    const sc = { traceId: parent?.traceId ?? id(16), spanId: id(8), traceFlags: 1 };
    const span = new RecordedSpan(name, sc, parent?.spanId, options.attributes);
    this.spans.push(span);
    return span;
  }
  startActiveSpan(name: string, ...args: unknown[]): any {
    const fn = args[args.length - 1] as (s: Span) => unknown;
    return fn(this.startSpan(name, (args.length > 1 ? args[0] : {}) as SpanOptions));
  }
}

/** A recorder installed as this test file's global tracer provider (once per file: the API keeps the first). */
export function installSpanRecorder(): SpanRecorder {
  const recorder = new SpanRecorder();
  trace.setGlobalTracerProvider(recorder);
  return recorder;
}

/** A context manager on AsyncLocalStorage (what an OTel SDK installs), so `context.with` propagates. */
export function installContextManager(): void {
  const als = new AsyncLocalStorage<Context>();
  const manager: ContextManager = {
    active: () => als.getStore() ?? ROOT_CONTEXT,
    with: (ctx, fn, thisArg, ...args) => als.run(ctx, () => fn.apply(thisArg, args)),
    bind: (_ctx, target) => target,
    enable: () => manager,
    disable: () => manager,
  };
  context.setGlobalContextManager(manager);
}
