import { currentRun } from '../index';
import type { RunContext } from '../index';

/**
 * Appends a stream's deltas to the run's progress stream from the step's body. One emit is one fenced
 * write: deltas that arrive while one is being written go together in the next, so a fast model is
 * not held back by the database and a slow one is seen token by token.
 */
export class DeltaEmitter {
  private queue: Array<{ kind: 'text' | 'reasoning'; text: string }> = [];
  private writing: Promise<void> | null = null;
  private failure: unknown = null;

  constructor(
    private readonly ctx: RunContext,
    private readonly topic: string,
  ) {}

  push(kind: 'text' | 'reasoning', text: string): void {
    if (!text) return;
    const last = this.queue[this.queue.length - 1];
    if (last && last.kind === kind) last.text += text;
    else this.queue.push({ kind, text });
    this.writing ??= this.drain();
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length) {
        const batch = this.queue.splice(0);
        for (const entry of batch) await (currentRun() ?? this.ctx).emit(this.topic, entry);
      }
    } catch (err) {
      this.failure = err;
      this.queue = [];
    } finally {
      this.writing = null;
    }
  }

  async flush(): Promise<void> {
    while (this.writing) await this.writing;
    if (this.failure) throw this.failure;
  }
}
