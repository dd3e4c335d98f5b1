import { currentRun } from '../index';
import type { RunContext } from '../index';

/**
 * Appends a streamed turn's text deltas to the run's progress stream from the step's body. One emit is
 * one fenced write: deltas that arrive while one is being written go together in the next, so a fast
 * model is not held back by the database and a slow one is seen token by token.
 */
export class DeltaEmitter {
  private queue = '';
  private writing: Promise<void> | null = null;
  private failure: unknown = null;

  constructor(
    private readonly ctx: RunContext,
    private readonly topic: string,
  ) {}

  push(text: string): void {
    if (!text) return;
    this.queue += text;
    this.writing ??= this.drain();
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue) {
        const text = this.queue;
        this.queue = '';
        await (currentRun() ?? this.ctx).emit(this.topic, { kind: 'text', text });
      }
    } catch (err) {
      this.failure = err;
      this.queue = '';
    } finally {
      this.writing = null;
    }
  }

  async flush(): Promise<void> {
    while (this.writing) await this.writing;
    if (this.failure) throw this.failure;
  }
}
