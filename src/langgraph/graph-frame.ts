import { AsyncLocalStorage } from 'node:async_hooks';
import type { RunContext } from '../index';

/**
 * One engine call a graph made inside `runGraph`, as the journal keeps it: enough to make the same call
 * again at the same position of the run when the graph resumes, where the engine answers it from its
 * record (a command's stored outcome, a signal's stored payload) without calling anything. A command's
 * `args` are kept as JSON text: its fingerprint depends on their key order, which jsonb would not keep.
 */
export type JournalEntry =
  | { kind: 'command'; name: string; key: string; args: string }
  | { kind: 'wait'; signal: string; key: string };

/** What the engine answered: a value, or the error it threw (a failed command, a signal timeout). */
export type CallOutcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * The async-local frame of one `runGraph` call. `journal` lists the engine calls of the graph in the
 * order they took their positions in the run (the order they were made, concurrent ones included); the
 * saver writes its answered prefix in the statement of every checkpoint and pending write of
 * `threadId`, so a checkpoint never reaches the database without the calls that came before it. `known` holds their outcomes by key: a node run again after a crash gets its
 * commands' outcomes from there, without a new position. `shareThread`: the code shares `threadId`
 * with this run whoever owns it (`runGraph`'s option).
 */
export interface GraphFrame {
  ctx: RunContext;
  threadId: string;
  shareThread?: boolean;
  journal: Array<{ entry: JournalEntry; done: boolean }>;
  known: Map<string, CallOutcome>;
}

/** @internal */
export const graphStorage = new AsyncLocalStorage<GraphFrame>();

/** The frame of the `runGraph` this code runs in (a node, the saver), if any. */
export function currentGraph(): GraphFrame | undefined {
  return graphStorage.getStore();
}

/** The journal as the saver writes it: the calls answered so far, up to the first still in flight. */
export function answeredJournal(frame: GraphFrame): JournalEntry[] {
  const end = frame.journal.findIndex((j) => !j.done);
  return (end < 0 ? frame.journal : frame.journal.slice(0, end)).map((j) => j.entry);
}

/** `key` made a command's own key (`@IdempotentCommand`'s `key`: 1-200 of `[A-Za-z0-9_.-]`). */
export function ownKey(key: string): string {
  const plain = key.replace(/[^A-Za-z0-9_.-]/g, '_');
  if (plain === key && key.length >= 1 && key.length <= 200) return key;
  return `${plain.slice(0, 150)}.${hash(key)}`;
}

/** A short, stable hash (FNV-1a, 2 × 32 bits) for keys that had to be rewritten. */
function hash(s: string): string {
  let a = 0x811c9dc5;
  let b = 0x01000193;
  for (let i = 0; i < s.length; i++) {
    a = Math.imul(a ^ s.charCodeAt(i), 0x01000193) >>> 0;
    b = Math.imul(b ^ s.charCodeAt(i), 0x811c9dc5) >>> 0;
  }
  return a.toString(16).padStart(8, '0') + b.toString(16).padStart(8, '0');
}
