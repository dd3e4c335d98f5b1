import { StepTimeoutError } from '../errors/step-timeout.error';
import { AttemptStop, attemptOutcome, lazySignal } from './retry';

/** A promise settled from outside. */
function deferred<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

/** How many 'abort' listeners the signal holds (Node keeps them in a symbol-keyed map). */
function listeners(signal: AbortSignal): number {
  const sym = Object.getOwnPropertySymbols(signal).find((s) => s.description === 'kEvents');
  const events = sym && (signal as unknown as Record<symbol, Map<string, { size: number }>>)[sym];
  return events?.get('abort')?.size ?? 0;
}

describe('a step attempt waits for its body (attemptOutcome, AttemptStop)', () => {
  it("settles as the body does, and leaves no listener on the run's signal", async () => {
    const run = new AbortController();
    const ok = attemptOutcome(Promise.resolve(7), 1000, 's', run.signal);
    expect(listeners(run.signal)).toBe(1);
    await expect(ok.promise).resolves.toBe(7);
    const boom = new Error('boom');
    await expect(attemptOutcome(Promise.reject(boom), 1000, 's', run.signal).promise).rejects.toBe(boom);
    expect(listeners(run.signal)).toBe(0);
  });

  it('rejects with StepTimeoutError when the body outlives its timeout (0: none)', async () => {
    const run = new AbortController();
    const body = deferred<number>();
    await expect(attemptOutcome(body.promise, 20, 'slow', run.signal).promise).rejects.toBeInstanceOf(
      StepTimeoutError,
    );
    const untimed = attemptOutcome(body.promise, 0, 'slow', run.signal).promise;
    setTimeout(() => body.resolve(1), 40);
    await expect(untimed).resolves.toBe(1);
  });

  it("rejects with the run signal's reason, fired before or while waiting", async () => {
    const fired = new AbortController();
    const why = new Error('lease lost');
    fired.abort(why);
    const late = new Error('late stop');
    // Fired already wins over a stop given already (the order untilAborted checked them in).
    await expect(
      attemptOutcome(new Promise(() => undefined), 0, 's', fired.signal, late).promise,
    ).rejects.toBe(why);
    const run = new AbortController();
    const waiting = attemptOutcome(new Promise(() => undefined), 0, 's', run.signal).promise;
    run.abort(why);
    await expect(waiting).rejects.toBe(why);
    expect(listeners(run.signal)).toBe(0);
  });

  it('a stop given before the wait, or during it, rejects it; the first reason wins everywhere', async () => {
    const run = new AbortController();
    const first = new Error('timed out');
    const second = new Error('abandoned');
    const before = new AttemptStop();
    before.stop(first);
    await expect(before.wait(new Promise(() => undefined), 0, 's', run.signal)).rejects.toBe(first);

    const during = new AttemptStop();
    const signal = lazySignal(run.signal, during.signal);
    const waiting = during.wait(new Promise(() => undefined), 0, 's', run.signal);
    during.stop(first);
    during.stop(second);
    await expect(waiting).rejects.toBe(first);
    // The body's signal, made only now that it is read, is fired with the first reason too.
    expect(signal().aborted).toBe(true);
    expect(signal().reason).toBe(first);
    expect(run.signal.aborted).toBe(false);
  });

  it('a body that settles first is not turned into a failure by a later stop or abort', async () => {
    const run = new AbortController();
    const stop = new AttemptStop();
    const waiting = stop.wait(Promise.resolve('done'), 10, 's', run.signal);
    await expect(waiting).resolves.toBe('done');
    stop.stop(new Error('too late'));
    run.abort(new Error('too late'));
    await expect(waiting).resolves.toBe('done');
  });
});
