/** The plain run's types (plain.ts). */
import type { Outcome } from './interpret';

export interface Occurrence {
  id: number;
  time: number;
  /** The occurrence in whose continuation this was called; null: from outside (a signal, the start). */
  parent: number | null;
  what: string;
  /** A signal's arrival: its index in `DiffCase.signals`. */
  signal?: number;
}

export interface Queued {
  id: number;
  /** Order of delivery: when it happened (a signal from the mailbox: when it was sent), then call order. */
  key: number;
  seq: number;
  time: number;
  /**
   * Timers and waits (true) are dropped once run() returned or the run was cancelled; steps, commands,
   * hung steps' attempts and the late-call bound (false) go on, also after a cancel (the engine finds
   * a cancel at a heartbeat or a write: until then they happen).
   */
  wait: Drop;
  fire: () => void;
}

export type Drop = boolean;

export type CallKind = 'step' | 'cmd' | 'child' | 'hang';

/** A catch or finally block run (`<label>#catch`), at a virtual time. */
export interface PlainMark {
  what: string;
  time: number;
}

export interface PlainResult {
  outcome: Outcome;
  status: 'succeeded' | 'cancelled';
  /** Commands called, by label (each makes one effect). */
  effects: Record<string, number>;
  /** When the durable run ends: run() returned (succeeded), or the cancel and what ran on (units). */
  end: number;
  /**
   * Up to when competing occurrences are spread (cases.ts): run()'s end, or the last catch or finally
   * block if later (a loser's try after run() returned, a step's outcome after a cancel: their order shows).
   */
  horizon: number;
  /** When the run finished (run() returned and no call was live any more; null: cancelled first). */
  finished: number | null;
  /**
   * What the durable run may take beyond `end` and `finished` on the real clock (ms): a cancel while a
   * hung body runs is found at a heartbeat, and one that ignores its signal is abandoned after a grace.
   */
  extraMs: number;
  /**
   * The catch and finally blocks run, in order. A cancelled run's go on after the cancel where a step's
   * outcome comes (the durable run delivers it, then stops at its next call): the durable executions
   * must each have run a prefix of them.
   */
  marks: PlainMark[];
  /** Why the durable run cannot be compared on this case (never returns, too long, ...), or null. */
  invalid: string | null;
  occurrences: Occurrence[];
  /** Steps, commands and children: label → [called at, settles at] (units). */
  calls: Map<string, { kind: CallKind; from: number; to: number }>;
  /** Coverage tags seen in this case. */
  tags: Set<string>;
}
