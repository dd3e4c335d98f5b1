/**
 * Live progress: bars redrawn in place on a terminal, or a plain line every few seconds when stdout is
 * not a TTY (CI logs, pipes).
 */
export interface SideSnapshot {
  done: number;
  active: number;
  waiting: number;
  /** Runs interrupted and picked up again so far (restarted at step one, or resumed). */
  recovered: number;
  duplicateEnquiries: number;
  duplicateCharges: number;
  workersAlive: number;
  workersNew: number;
}

export interface Snapshot {
  elapsedMs: number;
  phase: string;
  runs: number;
  submitted: number;
  workers: number;
  naive: SideSnapshot;
  durable: SideSnapshot & { byStatus: Record<string, number> };
  deploy: { replaced: number; total: number; current: string | null };
}

const bar = (value: number, total: number, width = 28) => {
  const filled = total > 0 ? Math.min(width, Math.round((value / total) * width)) : 0;
  return '█'.repeat(filled) + '░'.repeat(width - filled);
};
const pad = (s: string | number, n: number) => String(s).padStart(n);
const secs = (ms: number) => `${(ms / 1000).toFixed(1)}s`;

export class ProgressView {
  private drawn = 0;
  private lastPlain = 0;
  private readonly tty: boolean;

  constructor(
    private readonly out: NodeJS.WriteStream | NodeJS.WritableStream,
    private readonly mode: 'auto' | 'tty' | 'plain' | 'silent',
    private readonly plainEveryMs = 5000,
  ) {
    this.tty = mode === 'tty' || (mode === 'auto' && !!(out as NodeJS.WriteStream).isTTY);
  }

  /** A line of its own above the bars (on a terminal) or in the log. */
  note(line: string): void {
    if (this.mode === 'silent') return;
    if (this.tty) this.clear();
    this.out.write(`${line}\n`);
    this.drawn = 0;
  }

  update(s: Snapshot, force = false): void {
    if (this.mode === 'silent') return;
    if (!this.tty) {
      if (!force && s.elapsedMs - this.lastPlain < this.plainEveryMs) return;
      this.lastPlain = s.elapsedMs;
      this.out.write(
        `[${pad(secs(s.elapsedMs), 7)}] ${s.phase}: naive ${s.naive.done}/${s.runs} done, ${s.naive.active} in flight, ` +
          `${s.naive.recovered} restarted, ${s.naive.duplicateEnquiries} dup. enquiries | durable ${s.durable.done}/${s.runs} done, ` +
          `${s.durable.active} running, ${s.durable.waiting} waiting, ${s.durable.recovered} resumed, ` +
          `${s.durable.duplicateEnquiries} dup. enquiries | workers ${s.naive.workersAlive}+${s.durable.workersAlive} alive | ` +
          `deploy ${s.deploy.replaced}/${s.deploy.total}${s.deploy.current ? ` (${s.deploy.current})` : ''}\n`,
      );
      return;
    }
    const cols = Math.max(40, ((this.out as NodeJS.WriteStream).columns ?? 120) - 1);
    const side = (name: string, x: SideSnapshot, active: string, again: string) =>
      `${name.padEnd(8)} ${bar(x.done, s.runs, 20)} ${pad(x.done, 5)}/${s.runs} done ${pad(x.active, 5)} ${active}` +
      `${pad(x.recovered, 5)} ${again}  dup. enquiries ${x.duplicateEnquiries}, charges ${x.duplicateCharges}` +
      (x.waiting ? `  (${x.waiting} queued)` : '');
    const lines = [
      `purchase-order demo · ${s.runs} runs · ${s.workers} workers per side · ${s.phase} · ${secs(s.elapsedMs)}` +
        (s.submitted < s.runs ? ` · ${s.submitted}/${s.runs} submitted` : ''),
      side('naive', s.naive, 'in flight', 'restarted'),
      side('durable', s.durable, 'running  ', 'resumed  '),
      `workers  naive ${dots(s.naive.workersAlive, s.naive.workersNew)} · durable ` +
        `${dots(s.durable.workersAlive, s.durable.workersNew)} (● old, ◆ new version)`,
      `deploy   ${bar(s.deploy.replaced, s.deploy.total, 20)} ${s.deploy.replaced}/${s.deploy.total} replaced` +
        (s.deploy.current ? ` · ${s.deploy.current}` : ''),
    ].map((l) => (l.length > cols ? l.slice(0, cols) : l));
    this.clear();
    this.out.write(lines.map((l) => `\x1b[2K${l}`).join('\n') + '\n');
    this.drawn = lines.length;
  }

  private clear(): void {
    if (this.drawn) this.out.write(`\x1b[${this.drawn}A\x1b[0J`);
    this.drawn = 0;
  }

  /** Leaves the last frame on screen. */
  finish(): void {
    this.drawn = 0;
  }
}

function dots(alive: number, fresh: number): string {
  const old = Math.max(0, alive - fresh);
  return `${'●'.repeat(old)}${'◆'.repeat(fresh)} ${alive} alive`;
}
