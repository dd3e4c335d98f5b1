/**
 * The hung steps of the differential test (op `hang`, program.ts): a @DurableStep whose body never
 * settles unless its attempt's AbortSignal fires (`deaf`: not even then), or, on a second attempt with
 * `thenEnd`, returns at that virtual time. `timeoutMs` and the retry policy are a decorator's, so there
 * is one step per timeout (units of UNIT_MS) and number of attempts, made here: `diff_hang_<T>u_<A>x`;
 * `diff_hang` has no timeout. Retries come at once (1 ms, no jitter): the plain run models none.
 */
import { Injectable } from '@nestjs/common';
import { currentRun, DurableStep } from '../../src';
import { runStorage } from '../../src/engine/run-storage';
import { UNIT_MS } from './program';
import { post } from './world-client';

export interface HangArgs {
  label: string;
  /** When its first attempt is called (ms): the run's lateness. */
  due: number;
  deaf: boolean;
  /** A second attempt returns at t0 + thenEnd · unitMs (null: it hangs too). */
  thenEnd: number | null;
  t0: number;
  unitMs: number;
}

/** Timeouts up to this many units have a step (cases.ts may lengthen a generated one). */
export const MAX_HANG_UNITS = 40;

type Body = (a: HangArgs) => Promise<string>;

async function hangBody(a: HangArgs): Promise<string> {
  const run = currentRun()!;
  await post('/exec', { runId: run.runId, label: a.label, kind: 'hang', due: a.due, pid: process.pid });
  const attempt = runStorage.getStore()?.step?.attempt ?? 1;
  if (attempt >= 2 && a.thenEnd !== null) {
    const left = a.t0 + a.thenEnd * a.unitMs - Date.now();
    if (left > 0) await new Promise((r) => setTimeout(r, left));
    return `s:${a.label}`;
  }
  const signal = run.signal; // this attempt's: its timeout, or the run's stop
  return new Promise<string>((_, reject) => {
    if (a.deaf) return; // never settles: the engine abandons it
    if (signal.aborted) return reject(signal.reason as Error);
    signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
  });
}

const stepName = (timeout: number | null, attempts: number) =>
  timeout === null ? 'diff_hang' : `diff_hang_${timeout}u_${attempts}x`;

/** The provider of the hung steps. */
@Injectable()
export class DiffHangs {
  @DurableStep({ name: 'diff_hang', retry: { maxAttempts: 1 } })
  async forever(a: HangArgs): Promise<string> {
    return hangBody(a);
  }

  /** The step for a timeout (units; null: none) and a number of attempts. */
  of(timeout: number | null, attempts: number): Body {
    if (timeout === null) return (a) => this.forever(a);
    if (timeout > MAX_HANG_UNITS || !Number.isInteger(timeout))
      throw new Error(`hang timeout ${timeout}: only whole units up to ${MAX_HANG_UNITS} have a step`);
    const f = (this as unknown as Record<string, Body>)[stepName(timeout, attempts)];
    return (a) => f.call(this, a);
  }
}

for (let t = 1; t <= MAX_HANG_UNITS; t++)
  for (const attempts of [1, 2]) {
    const key = stepName(t, attempts);
    const d: PropertyDescriptor = { value: (a: HangArgs) => hangBody(a), writable: true, configurable: true };
    DurableStep({
      name: key,
      timeoutMs: t * UNIT_MS,
      retry: { maxAttempts: attempts, initialDelayMs: 1, maxDelayMs: 1, multiplier: 1, jitter: 0 },
    })(DiffHangs.prototype, key, d);
    Object.defineProperty(DiffHangs.prototype, key, d);
  }
