/** Parts the payloads of several event types share (events.interface.ts). */

/** Who acted: an operator's name (admin API, `RunRepository` calls with `by`), or a part of the engine. */
export type By = string;

/** A step's model usage, kept when the output of a `kind: 'model'` step carries `usage` or a request id. */
export interface ModelUsagePayload {
  usage?: unknown;
  requestId?: unknown;
}

/** The command an outcome event is about: its idempotency key, its name, and its step index. */
export interface CommandRef {
  key: string;
  name: string;
  step: number;
}

/**
 * On an event that ends a claim: the idempotency keys of commands this claim reserved but never sent
 * (the run stopped between the reserve and the call); their reservations were withdrawn.
 */
export interface NotSent {
  notSent?: string[];
}
