import { ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Client } from 'pg';
import { log } from './cli';

/**
 * A runner in block mode (bench/peers/common.mjs `serveBlocks`, bench/peers/engine.ts `--serve`): a
 * process that boots its library, warms up (untimed), says `{"ready": true}` on stdout, and then runs one
 * timed block per `{"cmd": "block", "n": N}` line on its stdin, answering each with one JSON line. Between
 * blocks it stays up and idle, so that its blocks and another runner's can alternate a few seconds apart.
 */
export class BlockRunner {
  private readonly waiting: Array<{ resolve: (v: any) => void; reject: (e: Error) => void }> = [];
  private readonly lines: any[] = [];
  private stderr = '';
  private exited = false;
  private blocks = 0;

  private constructor(
    readonly label: string,
    private readonly child: ChildProcess,
  ) {
    createInterface({ input: child.stdout!, crlfDelay: Infinity }).on('line', (text) => {
      if (!text.startsWith('{')) return;
      const msg = JSON.parse(text);
      const w = this.waiting.shift();
      if (w) w.resolve(msg);
      else this.lines.push(msg);
    });
    child.stderr!.on('data', (d: Buffer) => {
      this.stderr = (this.stderr + d.toString()).slice(-4000);
      if (process.env.BENCH_VERBOSE) process.stderr.write(d);
    });
    child.once('exit', (code, signal) => {
      this.exited = true;
      const err = new Error(`${label} exited (${code ?? signal}):\n${this.stderr.slice(-2000)}`);
      for (const w of this.waiting.splice(0)) w.reject(err);
    });
  }

  /** Starts `node args...` and waits for its ready line (its warm-up done). */
  static async start(label: string, args: string[], timeoutMs = 240_000): Promise<BlockRunner> {
    const child = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    const r = new BlockRunner(label, child);
    const ready = await r.next(timeoutMs);
    if (!ready.ready) throw new Error(`${label}: expected the ready line, got ${JSON.stringify(ready)}`);
    return r;
  }

  private next(timeoutMs: number): Promise<any> {
    const queued = this.lines.shift();
    if (queued) return Promise.resolve(queued);
    if (this.exited) return Promise.reject(new Error(`${this.label} is gone:\n${this.stderr.slice(-2000)}`));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.child.kill('SIGKILL');
        reject(new Error(`${this.label}: no answer within ${timeoutMs} ms:\n${this.stderr.slice(-2000)}`));
      }, timeoutMs);
      this.waiting.push({
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
    });
  }

  /** One timed block of `n` units: the runner's figures for it. */
  async block(n: number, timeoutMs = 180_000): Promise<Record<string, any>> {
    this.child.stdin!.write(`${JSON.stringify({ cmd: 'block', n, i: this.blocks++ })}\n`);
    const out = await this.next(timeoutMs);
    if (!out.block) throw new Error(`${this.label}: expected a block's figures, got ${JSON.stringify(out)}`);
    return out;
  }

  /** Shuts the library down; the runner's closing line (settings, notes). */
  async end(timeoutMs = 60_000): Promise<Record<string, any>> {
    if (this.exited) return {};
    this.child.stdin!.write(`${JSON.stringify({ cmd: 'end' })}\n`);
    try {
      return await this.next(timeoutMs);
    } finally {
      this.child.stdin!.end();
    }
  }

  /** Kills the process (by its own pid) if it is still there. */
  kill(): void {
    if (!this.exited) this.child.kill('SIGKILL');
  }
}

/**
 * CHECKPOINT before a timed block, when the admin connection may (superuser): every block then starts
 * with the same full-page-write state, and no checkpoint the server would start by itself falls into
 * one side's block and not the other's. A no-op otherwise.
 */
export class Checkpointer {
  /** CHECKPOINTs run, and the time they took (ms). */
  count = 0;
  ms = 0;

  private constructor(private readonly c: Client | null) {}

  static async open(admin: string): Promise<Checkpointer> {
    const c = new Client({ connectionString: admin, application_name: 'dx-bench-checkpoint' });
    await c.connect();
    try {
      await c.query('checkpoint');
      return new Checkpointer(c);
    } catch {
      log('CHECKPOINT not allowed on this connection: blocks start without one');
      await c.end();
      return new Checkpointer(null);
    }
  }

  async run(): Promise<void> {
    if (!this.c) return;
    const t0 = performance.now();
    await this.c.query('checkpoint');
    this.ms += performance.now() - t0;
    this.count++;
  }

  /** `N checkpoints, S s`, for the logs. */
  toString(): string {
    return `${this.count} checkpoints, ${(this.ms / 1000).toFixed(1)} s`;
  }

  async close(): Promise<void> {
    await this.c?.end().catch(() => undefined);
  }
}

/**
 * `rounds` rounds; in round r the sides run in an order rotated by r (A B, B A, A B ...). With `warm`,
 * first one untimed round (`warm(side)` for each side, in the same alternation): the first block after a
 * boot ran slow on either side often enough to put its pair's ratio out of line (a fifth or more).
 */
export async function alternateBlocks<S extends string>(
  rounds: number,
  sides: S[],
  run: (side: S, round: number) => Promise<void>,
  warm?: (side: S) => Promise<void>,
): Promise<void> {
  if (warm) for (const side of sides) await warm(side);
  for (let r = 0; r < rounds; r++) {
    const s = r % sides.length;
    for (const side of [...sides.slice(s), ...sides.slice(0, s)]) await run(side, r);
  }
}
