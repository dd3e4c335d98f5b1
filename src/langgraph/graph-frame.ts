import { AsyncLocalStorage } from 'node:async_hooks';
import type { RunContext } from '../index';
import type { SerializerProtocol } from '@langchain/langgraph-checkpoint';

/**
 * One engine call a graph made inside `runGraph`, as the journal keeps it: enough to make the same call
 * again at the same position of the run when the graph resumes, where the engine answers it from its
 * record (a command's stored outcome, a signal's stored payload) without calling anything. A command's
 * `args` are kept as JSON text: its fingerprint depends on their key order, which jsonb would not keep.
 */
export type JournalEntry =
  | { kind: 'command'; name: string; key: string; args: string }
  | { kind: 'wait'; signal: string; key: string }
  | ModelEntry;

/**
 * A model call of the graph (`durableChatModel`), as the journal keeps it: its answer (the model's
 * `ChatResult`, as the saver's serializer wrote it: JSON text, or base64 for bytes) and its token
 * counts; or its error, when it failed for good; or, while it is still being retried, its failed
 * attempts so far. It takes no position in the run (the engine never sees it), so it is journaled when
 * it ends (or fails an attempt), in any order, and written at once (`recorder.flush`). The last entry
 * of a key is the one that counts.
 */
export interface ModelEntry {
  kind: 'model';
  name: string;
  /** The call: the node's task, a hash of its prompt and tools, and its count among those in the task. */
  key: string;
  answer?: { type: string; data: string; base64?: true };
  usage?: ModelUsage | null;
  /** The error it failed with for good, as the workflow gets it (a replay throws it again). */
  error?: StoredModelError;
  /** Failed attempts so far, the call not ended: a claim that asks again has only those left. */
  failures?: number;
}

/** A model call's error as recorded: its name, message and primitive fields (`status`, `code`, …). */
export interface StoredModelError {
  name: string;
  message: string;
  fields: Record<string, string | number | boolean | null>;
}

/** Token counts of a model answer, as the engine records a model step's. */
export interface ModelUsage {
  inputTokens?: number;
  outputTokens?: number;
  totalTokens?: number;
}

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
  /** The saver's serializer, and a write of the journal now (fenced, as every write of the saver). */
  recorder: { serde: SerializerProtocol; flush(): Promise<void> };
  /** How many model calls of each task and prompt this `graph.invoke` made (reset at each). */
  modelCalls: Map<string, number>;
}

/** @internal */
export const graphStorage = new AsyncLocalStorage<GraphFrame>();

/** The frame of the `runGraph` this code runs in (a node, the saver), if any. */
export function currentGraph(): GraphFrame | undefined {
  return graphStorage.getStore();
}

/**
 * The journal as the saver writes it: the engine calls answered so far, up to the first still in
 * flight, and every model answer (they take no position: one after a call in flight is kept too). Each
 * write holds what the previous ones held, so the stored journal only grows.
 */
export function answeredJournal(frame: GraphFrame): JournalEntry[] {
  const end = frame.journal.findIndex((j) => !j.done);
  return frame.journal
    .filter((j, i) => end < 0 || i < end || (j.done && j.entry.kind === 'model'))
    .map((j) => j.entry);
}

/** The journal of the `runGraph` of this thread (JSON), written with its checkpoint; null otherwise. */
export function journalOf(threadId: string): string | null {
  const frame = currentGraph();
  return frame && frame.threadId === threadId ? JSON.stringify(answeredJournal(frame)) : null;
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
