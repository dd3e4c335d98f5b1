import type { CommandRow, RecordedStep } from '../store/run-state/load-replay';
import type { CheckpointWrite } from '../store/run-state/fence';
export type { RecordedStep } from '../store/run-state/load-replay';

/** How long replay may wait for the workflow to ask for the next recorded result. */
export const REPLAY_STALL_MS = 1000;

/** Recorded values (ctx.now/uuid/random, wait deadlines, patch markers) are read at once, not delivered in order. */
export const isDelivery = (name: string): boolean => !/^\$(?!sleep$|signal:|child:|emit:)/.test(name);

/**
 * The replay log of one claim: step indexes, recorded results, and the order in which results reach
 * the workflow. A result is delivered when its commit returns, in the order the commits were sent
 * (`seq`), one per event-loop turn; replay delivers recorded results in that same order. Code after a
 * `Promise.all` therefore reaches its next calls in the same order on every replay and gets the same
 * indexes (and command keys). Nothing new runs until every recorded result has been delivered; a
 * workflow that stops asking for the next recorded result is non-deterministic. It also holds the
 * values recorded in this claim until a write carrying them commits.
 * @internal
 */
export class ReplayLog {
  private nextIndex = 0;
  private nextSeq: number;
  /** Recorded deliveries in delivery order (indexes). */
  private readonly order: number[];
  /** Recorded deliveries not yet handed over (for an O(1) membership test). */
  private readonly undelivered: Set<number>;
  private head = 0;
  private readonly requested = new Map<number, { resolve: () => void; reject: (e: unknown) => void }>();
  private pumpScheduled = false;
  private stallTimer: NodeJS.Timeout | null = null;
  private done: { promise: Promise<void>; resolve: () => void; reject: (e: unknown) => void } | null = null;
  private failed: unknown = null;
  /** Live deliveries: the next seq to hand over, and those whose commit returned early. */
  private liveNext: number;
  private readonly held = new Map<number, () => void>();
  private readonly abandoned = new Set<number>();

  /** Recorded indexes the workflow asked for (the replay check reports the others). */
  private readonly asked = new Set<number>();
  /** Values recorded in this claim (ctx.now/uuid/random) whose write has not committed yet. */
  private pending: CheckpointWrite[] = [];

  /**
   * `nonDeterminism` stops the run for a call that does not match what was recorded at `index` and
   * returns the error to throw; a recorded result the workflow never asks for again stalls replay and
   * stops the run the same way after REPLAY_STALL_MS. `reserved` holds the commands reserved (by step
   * index) that have no recorded result yet: only that command may be called at its index.
   */
  constructor(
    private readonly recorded: Map<number, RecordedStep>,
    private readonly nonDeterminism: (
      index: number,
      recorded: string,
      requested: string,
      detail?: string,
    ) => unknown,
    private readonly reserved: ReadonlyMap<number, CommandRow> = new Map(),
    /** A phase of its own (the cleanup after a cancel): its first index, and the lowest seq it may take. */
    phase: { firstIndex: number; seqFloor: number } = { firstIndex: 0, seqFloor: 0 },
  ) {
    this.nextIndex = phase.firstIndex;
    const deliveries = [...recorded.entries()].filter(([, r]) => isDelivery(r.name));
    const key = ([i, r]: [number, RecordedStep]) => (r.seq === null ? i - 2 ** 40 : r.seq);
    deliveries.sort((a, b) => key(a) - key(b) || a[0] - b[0]);
    this.order = deliveries.map(([i]) => i);
    this.undelivered = new Set(this.order);
    const maxSeq = deliveries.reduce((m, [, r]) => Math.max(m, r.seq ?? -1), -1);
    this.nextSeq = this.liveNext = Math.max(maxSeq + 1, phase.seqFloor);
  }

  /** True while recorded results remain to be delivered. */
  get replaying(): boolean {
    return this.head < this.order.length;
  }

  /** The next step index (steps, commands, recorded values and waits share one sequence). */
  allocIndex(): number {
    return this.nextIndex++;
  }

  /** `ctx.patched`: the record goes past the next call (`before`: what claims of lower epochs wrote does). */
  passedNext(before = Infinity): boolean {
    for (const [i, r] of this.recorded) if (i >= this.nextIndex && (r.epoch ?? 0) < before) return true;
    return before === Infinity && [...this.reserved.keys()].some((i) => i >= this.nextIndex);
  }

  /** The entry recorded at `index`, if any. */
  at(index: number): RecordedStep | undefined {
    return this.recorded.get(index);
  }

  /** The command reserved at `index` (by an earlier claim, with no recorded result yet), if any. */
  reservedAt(index: number): CommandRow | undefined {
    return this.recorded.has(index) ? undefined : this.reserved.get(index);
  }

  /**
   * The checkpoint recorded at `index`, if any. Another name there (or another command than the one
   * reserved there), or the same name called with other arguments (when both fingerprints are known),
   * is non-determinism: the run stops before any call.
   */
  recordedAt(index: number, name: string, fingerprint: string | null = null): RecordedStep | undefined {
    const cmd = this.reservedAt(index);
    if (cmd && `command:${cmd.name}` !== name) throw this.nonDeterminism(index, `command:${cmd.name}`, name);
    const rec = this.recorded.get(index);
    if (rec) this.asked.add(index);
    if (rec && rec.name !== name) throw this.nonDeterminism(index, rec.name, name);
    if (rec && rec.fingerprint && fingerprint && rec.fingerprint !== fingerprint)
      throw this.nonDeterminism(index, rec.name, name, 'was called with other arguments');
    return rec;
  }

  /** Recorded entries (index and name) the workflow has not asked for so far. */
  unasked(): Array<{ index: number; name: string }> {
    const out = [...this.recorded.entries()].filter(([i]) => !this.asked.has(i));
    return out.map(([index, r]) => ({ index, name: r.name }));
  }

  /** Stops the run: the call at `index` does not match what was recorded for it (`detail` says how). */
  mismatch(index: number, name: string, detail: string): unknown {
    return this.nonDeterminism(index, name, name, detail);
  }

  /** A value recorded now (ctx.now/uuid/random): it rides on every fenced write until one commits. */
  addPending(value: CheckpointWrite): void {
    this.pending.push(value);
  }

  /** Recorded values not yet durable (kept until `durable` drops those a committed write carried). */
  takePending(): CheckpointWrite[] {
    return this.pending.slice();
  }

  /** A fenced write carrying `carried` (from `takePending`) committed. */
  durable(carried: CheckpointWrite[]): void {
    if (carried.length) this.pending = this.pending.filter((p) => !carried.includes(p));
  }

  /** Resolves when the recorded result at `index` is due to reach the workflow (its turn in order). */
  replayed(index: number): Promise<void> {
    if (this.failed) return Promise.reject(this.failed);
    if (!this.undelivered.has(index)) return Promise.resolve(); // a recorded value, not a delivery
    return new Promise<void>((resolve, reject) => {
      this.requested.set(index, { resolve, reject });
      this.schedulePump();
    });
  }

  /** Resolves once every recorded result has been delivered: live work waits for it. */
  replayDone(): Promise<void> {
    if (this.failed) return Promise.reject(this.failed);
    if (!this.replaying) return Promise.resolve();
    if (!this.done) {
      let resolve!: () => void;
      let reject!: (e: unknown) => void;
      const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
      promise.catch(() => undefined);
      this.done = { promise, resolve, reject };
    }
    this.schedulePump();
    return this.done.promise;
  }

  /** Takes the delivery order of a commit about to be sent. */
  takeSeq(): number {
    return this.nextSeq++;
  }

  /** A commit that will never be delivered (it failed or found nothing): later ones may pass it. */
  abandon(seq: number): void {
    this.abandoned.add(seq);
    this.releaseLive();
  }

  /** Resolves when the result committed with `seq` may reach the workflow (all earlier ones have). */
  deliverLive(seq: number): Promise<void> {
    if (seq === this.liveNext) {
      this.liveNext++;
      this.releaseLiveSoon();
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => this.held.set(seq, resolve));
  }

  /** Fails every waiter (the run stopped). */
  fail(err: unknown): void {
    if (this.failed) return;
    this.failed = err;
    this.clearStall();
    for (const w of this.requested.values()) w.reject(err);
    this.requested.clear();
    this.done?.reject(err);
  }

  private releaseLive(): void {
    while (this.abandoned.delete(this.liveNext)) this.liveNext++;
    const next = this.held.get(this.liveNext);
    if (!next) return;
    this.held.delete(this.liveNext);
    this.liveNext++;
    next();
    this.releaseLiveSoon();
  }

  /** The next held result goes on a later turn, after the code the last one woke has run. */
  private releaseLiveSoon(): void {
    if (this.held.size || this.abandoned.size) setImmediate(() => this.releaseLive());
  }

  private schedulePump(): void {
    if (this.pumpScheduled || this.failed) return;
    this.pumpScheduled = true;
    setImmediate(() => this.pump());
  }

  /** One delivery per turn, in recorded order; the workflow's reaction runs before the next one. */
  private pump(): void {
    this.pumpScheduled = false;
    if (this.failed) return;
    if (!this.replaying) {
      this.clearStall();
      this.done?.resolve();
      return;
    }
    const index = this.order[this.head];
    const waiter = this.requested.get(index);
    if (!waiter) {
      this.stallTimer ??= setTimeout(() => {
        this.stallTimer = null;
        if (this.requested.has(this.order[this.head])) return;
        const name = this.recorded.get(index)!.name;
        this.nonDeterminism(index, name, name, 'was never asked for again (another path)');
      }, REPLAY_STALL_MS);
      return;
    }
    this.clearStall();
    this.requested.delete(index);
    this.undelivered.delete(index);
    this.head++;
    waiter.resolve();
    this.schedulePump();
  }

  private clearStall(): void {
    if (this.stallTimer) clearTimeout(this.stallTimer);
    this.stallTimer = null;
  }
}
