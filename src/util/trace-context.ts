import type * as OTel from '@opentelemetry/api';
import { tryLoadOptional } from './optional-dependency';

/** A W3C `traceparent`: version 00, trace id, parent span id, flags. */
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

let api: typeof OTel | null | undefined;

/**
 * The W3C `traceparent` of the span active where this is called (the request that starts a run), or
 * null: no `@opentelemetry/api` installed, no span active, or an invalid one. @internal
 */
export function activeTraceparent(): string | null {
  if (api === undefined) api = tryLoadOptional<typeof OTel>('@opentelemetry/api') ?? null;
  if (!api) return null;
  const sc = api.trace.getSpanContext(api.context.active());
  if (!sc || !api.trace.isSpanContextValid(sc)) return null;
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/** A stored `traceparent` as a span context to parent on, or null when it is not one (stored data is not trusted). @internal */
export function parseTraceparent(value: unknown): OTel.SpanContext | null {
  const m = typeof value === 'string' ? TRACEPARENT.exec(value) : null;
  if (!m || /^0+$/.test(m[1]) || /^0+$/.test(m[2])) return null;
  return { traceId: m[1], spanId: m[2], traceFlags: parseInt(m[3], 16), isRemote: true };
}
