import { CallGate, RunFrame, runStorage } from '../run-storage';

/**
 * The gate of one live call (a command body, a step body's attempt): what a request made inside it
 * checks, synchronously, where its bytes are handed to the socket (see `undici-hook.ts`,
 * `http-hook.ts`, `http2-hook.ts`, `socket-hook.ts`, and `store/pg-wire-hook.ts`). The gate is captured
 * when the request is made, never at the write: a pooled request is written in whatever async context
 * freed its socket, possibly another run's (a plain socket write is made by its caller: captured there).
 * @internal
 */
export class WireGate implements CallGate {
  private open = true;
  /** Set when the engine gave up on the call (its timeout, a stop): everything it sends is refused. */
  private revoked: Error | null = null;

  constructor(
    /**
     * The lease's wire check: undefined while it holds, else the error the run stopped with. `what`
     * describes the check for that error (built only when it is refused).
     */
    private readonly wireCheck: (what: () => string) => Error | undefined,
    /** What is calling, for the error (`command charge_card`, `step fetchQuote`). */
    readonly label: string,
  ) {}

  /** The call is still running: a request left behind by a call that ended (a timer) is not its. */
  get live(): boolean {
    return this.open || this.revoked !== null;
  }

  /** The engine abandoned the call while it may still run: from now on nothing it sends leaves. */
  revoke(error: Error): void {
    this.revoked ??= error;
  }

  /** The call settled. */
  end(): void {
    this.open = false;
  }

  /**
   * Synchronous: undefined lets the bytes leave; an error aborts them (the run has stopped). `target`
   * says what was about to leave (`a request to POST https://api.example`, `a write to 10.0.0.5:25`).
   */
  check(target: string): Error | undefined {
    if (this.revoked) return this.revoked;
    if (!this.open) return undefined;
    return this.wireCheck(() => `the wire check of ${this.label} before ${target}`);
  }
}

/** The gate of the live call this code runs in, if any (requests outside a run's calls: none). */
export function currentGate(): CallGate | undefined {
  const gate = runStorage.getStore()?.gate;
  return gate?.live ? gate : undefined;
}

/**
 * Runs a call's body in its frame; the frame's gate (if any) ends when the body settles, so a request
 * a finished body left behind (an interval, an un-awaited call) is no longer checked as its own.
 */
export function gated<T>(frame: RunFrame, body: () => T): T {
  const result = runStorage.run(frame, body);
  const gate = frame.gate as WireGate | undefined;
  if (!gate) return result;
  // Any thenable (a promise of another realm or library), not only this realm's Promise.
  const then = (result as { then?: unknown } | null)?.then;
  if (typeof then === 'function') {
    const end = (): void => gate.end();
    then.call(result, end, end);
  } else gate.end();
  return result;
}
