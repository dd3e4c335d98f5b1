/**
 * The calls a workflow made (a step, a command, a child's start, an emit), each counted from the
 * moment it is made until its promise settles, awaits of its own included. `run()` returning does not
 * end the run while one is unsettled: it finishes and is recorded first, as in JavaScript.
 * @internal
 */
export class CallTally {
  private count = 0;
  private readonly waiters: Array<() => void> = [];
  /** Called when the last counted call settles. */
  onIdle?: () => void;

  /** Calls made and not settled. */
  get size(): number {
    return this.count;
  }

  /** Counts `p` until it settles; returns it unchanged. */
  calling<T>(p: Promise<T>): Promise<T> {
    this.count++;
    const done = () => {
      if (--this.count > 0) return;
      this.waiters.splice(0).forEach((wake) => wake());
      this.onIdle?.();
    };
    p.then(done, done);
    return p;
  }

  /** Resolves once every counted call has settled. */
  async settled(): Promise<void> {
    while (this.count > 0) await new Promise<void>((r) => this.waiters.push(r));
  }
}
