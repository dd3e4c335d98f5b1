import { Inject, Injectable } from '@nestjs/common';
import { DURABLE_EXECUTION_OPTIONS } from '../durable-execution.constants';
import type { CheckpointView, RunEvent, RunView } from '../interfaces/run.interface';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { RedactHook, RedactKey, redactErrorMessage, redactValue } from '../options/redact';
import type { CommandView } from '../interfaces/command.interface';
import type { StreamEntry } from '../interfaces/stream.interface';
import type { MeasuredCheckpoint } from '../store/admin-runs.store';
import { cappedCheckpoint, checkpointRoute, truncated } from './shown-value';

/**
 * Applies the module's `redact` hook to what the admin API and the inspector page show. Stored data is
 * never changed: each view is a fresh read, and redaction happens on the copy about to be sent. @internal
 */
@Injectable()
export class AdminRedactor {
  private readonly hook?: RedactHook;
  /** `limits.maxShownValueBytes`: the most bytes of a checkpoint value shown (the database measures it). */
  readonly maxShownValueBytes: number;

  constructor(@Inject(DURABLE_EXECUTION_OPTIONS) options: ResolvedDurableOptions) {
    this.hook = options.redact;
    this.maxShownValueBytes = options.limits.maxShownValueBytes;
  }

  /**
   * A checkpoint as the admin API shows it: its output and meta over `limits.maxShownValueBytes` (as
   * measured by the database, before the hook; they were never read) as a marker, the others redacted.
   * The hook is never called for a value over the cap.
   */
  shownCheckpoint({ checkpoint: c, outputBytes, metaBytes }: MeasuredCheckpoint): CheckpointView {
    const max = this.maxShownValueBytes;
    const fetch = checkpointRoute(c);
    const output =
      outputBytes !== null && outputBytes > max
        ? truncated(outputBytes, fetch)
        : c.output === null
          ? null
          : this.output(c);
    const meta =
      metaBytes !== null && metaBytes > max
        ? truncated(metaBytes, fetch)
        : c.meta === null
          ? null
          : this.value('checkpoint.meta', c.meta);
    return cappedCheckpoint({ ...c, output, meta: meta as CheckpointView['meta'] }, max);
  }

  private value<T>(key: RedactKey, value: T): T {
    return redactValue(this.hook, key, value);
  }

  run(r: RunView): RunView;
  run(r: RunView | null | undefined): RunView | null | undefined;
  run(r: RunView | null | undefined): RunView | null | undefined {
    if (!r || !this.hook) return r;
    return {
      ...r,
      input: this.value('run.input', r.input),
      output: r.output === null ? null : this.value('run.output', r.output),
      state: this.value('run.state', r.state),
      error: r.error === null ? null : this.value('run.error', r.error),
      parkedReason: r.parkedReason === null ? null : this.value('run.parked_reason', r.parkedReason),
      cancelReason: r.cancelReason === null ? null : this.value('run.cancel_reason', r.cancelReason),
      idempotencyKey: r.idempotencyKey === null ? null : this.value('run.idempotency_key', r.idempotencyKey),
      tags: this.value('run.tags', r.tags),
    };
  }

  /** A list row: parked reason and error message only (no input or output there). */
  summary<T extends { parkedReason: string | null; errorMessage: string | null }>(s: T): T {
    if (!this.hook) return s;
    return {
      ...s,
      parkedReason: s.parkedReason === null ? null : this.value('run.parked_reason', s.parkedReason),
      errorMessage: redactErrorMessage(this.hook, s.errorMessage),
    };
  }

  /** A checkpoint; a `$signal:<name>` wait's `{ payload }` goes through as `signal.payload`. */
  checkpoint(c: CheckpointView): CheckpointView {
    if (!this.hook) return c;
    const meta = c.meta === null ? null : this.value('checkpoint.meta', c.meta);
    return { ...c, meta, output: this.output(c) };
  }

  /** A checkpoint's output through the hook (a signal wait's payload as `signal.payload`). */
  private output(c: CheckpointView): unknown {
    if (!this.hook) return c.output;
    const out = c.output as { payload?: unknown } | null;
    if (c.stepName.startsWith('$signal:') && out && typeof out === 'object' && 'payload' in out) {
      return { ...out, payload: this.value('signal.payload', out.payload) };
    }
    return this.value('checkpoint.output', c.output);
  }

  command(c: CommandView): CommandView;
  command(c: CommandView | undefined): CommandView | undefined;
  command(c: CommandView | undefined): CommandView | undefined {
    if (!c || !this.hook) return c;
    return {
      ...c,
      payload: this.value('command.args', c.payload),
      result: c.result === null ? null : this.value('command.result', c.result),
      error: c.error === null ? null : this.value('command.error', c.error),
    };
  }

  /** A progress stream entry: its data through the hook as `stream.data`. */
  streamEntry(e: StreamEntry): StreamEntry {
    return this.hook ? { ...e, data: this.value('stream.data', e.data) } : e;
  }

  /** An event's payload through the hook under its event type (again: stored ones passed it once). */
  event(e: RunEvent): RunEvent {
    if (!this.hook || e.payload === null || e.payload === undefined) return e;
    return { ...e, payload: this.value(e.type as RedactKey, e.payload) };
  }
}
