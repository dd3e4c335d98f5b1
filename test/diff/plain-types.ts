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
  /** Timers and waits are dropped once run() returned or the run was cancelled; steps and commands finish. */
  wait: boolean;
  fire: () => void;
}

export type CallKind = 'step' | 'cmd' | 'child';

export interface PlainResult {
  outcome: Outcome;
  status: 'succeeded' | 'cancelled';
  /** Commands called, by label (each makes one effect). */
  effects: Record<string, number>;
  /** When the durable run ends: run() returned (succeeded), or the cancel and what ran on (units). */
  end: number;
  /** Why the durable run cannot be compared on this case (never returns, too long, ...), or null. */
  invalid: string | null;
  occurrences: Occurrence[];
  /** Steps, commands and children: label → [called at, settles at] (units). */
  calls: Map<string, { kind: CallKind; from: number; to: number }>;
  /** Coverage tags seen in this case. */
  tags: Set<string>;
}
