/**
 * The side channel of the catch and finally blocks (issue 45: a park runs no user code). Every execution
 * of the durable workflow's run() (a claim's, a replay's) numbers itself and reports each catch or
 * finally block it runs, in order, with whether the run had stopped for a cancel or a lost lease then
 * (its promises reject with typed errors, so blocks run: plain JavaScript does not model that). A worker
 * process sends them to the test process over IPC (DIFF_MARKS_IPC=1, faults.ts forwards them); in the
 * test process they are stored here. The harness checks that every execution ran a prefix of the plain
 * run's blocks: an execution that parked, ran nothing plain JavaScript would not have run by then.
 */

export interface Mark {
  /** `<pid>:<n>`: the n-th execution of run() in that process. */
  exec: string;
  seq: number;
  /** `<label>#catch` or `<label>#finally`. */
  what: string;
  /** The run had stopped with an error of its own (a cancel, a lost lease) when the block ran. */
  stopped: boolean;
}

const byRun = new Map<string, Mark[]>();

/** The first mark of every execution (not a block): executions that ran no block are counted too. */
export const BEGUN = '(run)';

export function recordMark(runId: string, m: Mark): void {
  let ms = byRun.get(runId);
  if (!ms) byRun.set(runId, (ms = []));
  ms.push(m);
}

/** A message a worker process sends its parent. */
export interface MarkMessage {
  diffMark: Mark;
  runId: string;
}

export const isMarkMessage = (m: unknown): m is MarkMessage =>
  !!m && typeof m === 'object' && 'diffMark' in m && 'runId' in m;

/** From workflow code: to the test process (a worker process), or stored here. */
export function sendMark(runId: string, m: Mark): void {
  if (process.env.DIFF_MARKS_IPC === '1' && process.send) process.send({ diffMark: m, runId });
  else recordMark(runId, m);
}

/** Each execution's blocks, in order, up to the first one run after the run stopped. */
export function executionsOf(runId: string): Map<string, string[]> {
  const out = new Map<string, Mark[]>();
  for (const m of byRun.get(runId) ?? []) {
    let ms = out.get(m.exec);
    if (!ms) out.set(m.exec, (ms = []));
    ms.push(m);
  }
  return new Map(
    [...out].map(([exec, ms]) => {
      const sorted = ms.sort((x, y) => x.seq - y.seq);
      const stop = sorted.findIndex((m) => m.stopped);
      const ran = (stop < 0 ? sorted : sorted.slice(0, stop)).map((m) => m.what);
      return [exec, ran.filter((w) => w !== BEGUN)];
    }),
  );
}

/** Forgets a run's marks (read once its case was compared). */
export function dropMarks(runId: string): void {
  byRun.delete(runId);
}
