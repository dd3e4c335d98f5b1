/**
 * The pause hook of a case: records every pause point reached, and fires the case's faults there.
 * - hold: the run waits while the actions scheduled "during" that fault are applied;
 * - zombie: the run is frozen and its worker stops heartbeating (and claiming) until another worker
 *   took the run over (release 'takeover') or everything settled (release 'settled');
 * - crash: the worker is gone: this run and every later pause point of that worker freeze forever;
 * - failover: the run's row moves to an older WAL timeline and the run goes on (see Fault['kind']);
 * - lost-suffix: a real asynchronous failover begins (the harness's rig) and the run goes on.
 */
import type { PausePointInfo } from '../../src/testing';
import type { Fault } from './program';
import { claimTag, claimToken, world } from './world';

export interface ModelWorker {
  id: string;
  state: 'live' | 'stalled' | 'crashed' | 'deaf' | 'drained';
  /** `runId:token` (claimTag) of every claim this worker made. */
  claims: Set<string>;
}

interface Frozen {
  fault: number;
  runId: string;
  /** The frozen claim's token (claimToken). */
  epoch: number;
  worker: ModelWorker;
  release: Fault['release'];
  open: () => void;
}

const NEVER = new Promise<void>(() => undefined);

/**
 * A pause point as the model sees it: the engine's, and `in-body`, which the model's own command
 * bodies reach before their request leaves (FaultPlan.inBody), past every check of the engine's.
 */
export type ModelPointInfo = Omit<PausePointInfo, 'point'> & { point: PausePointInfo['point'] | 'in-body' };

export class FaultPlan {
  readonly workers = new Map<string, ModelWorker>();
  /** Claims (claimTag) a fault touched: their unfinished work may legitimately run again. */
  readonly faulted = new Set<string>();
  /** Rounds in which the harness renewed leases too late (a starved machine): counted as faults. */
  starved = 0;
  /** Epochs that parked (or tried to): a step in flight in a fan-out may run again after a park. */
  readonly parked = new Set<string>();
  readonly frozen: Frozen[] = [];
  /** A lost-suffix failover under way (null: none, or over). */
  outage: Promise<void> | null = null;
  readonly fired: boolean[];
  private readonly hits: number[];

  constructor(
    private readonly faults: Fault[],
    private readonly runIds: () => string[],
    /** Applies the actions scheduled during fault `i` (awaited by the held run). */
    private readonly during: (fault: number, ms: number) => Promise<void>,
    /** A worker crashed: the harness boots a replacement. */
    private readonly crashed: (w: ModelWorker) => void,
    /** A worker is shut down gracefully (its drain), while a call of it is held in flight. */
    private readonly drain: (w: ModelWorker) => void = () => undefined,
    /** Moves a run's row to an older timeline (a failover fault). */
    private readonly failover: (runId: string) => Promise<void> = async () => undefined,
    /** Begins a real failover that loses what the primary commits in the next `windowMs`. */
    private readonly lostSuffix: (windowMs: number) => Promise<void> = async () => undefined,
  ) {
    this.fired = faults.map(() => false);
    this.hits = faults.map(() => 0);
  }

  /** The `in-body` point of a command body: the claim's worker is the one that made that claim. */
  inBody = (
    fence: { runId: string; epoch: number; timeline: number },
    detail: string,
  ): void | Promise<void> => {
    const tag = claimTag(fence.runId, fence);
    const w = [...this.workers.values()].find((x) => x.claims.has(tag));
    if (!w) return;
    const { runId, epoch, timeline } = fence;
    return this.hook({ point: 'in-body', runId, epoch, timeline, workerId: w.id, detail });
  };

  hook = (info: ModelPointInfo): void | Promise<void> => {
    // A schedule's firing (`$schedule:<name>`) is faulted like a run's call; it is no run of the trail.
    const firing = info.runId.startsWith('$schedule:');
    if (!firing && !this.runIds().includes(info.runId)) return;
    if (!firing) world.hits.push({ ...info, epoch: claimToken(info), seq: world.nextSeq() });
    const w = this.workers.get(info.workerId);
    if (!w) return;
    const tag = claimTag(info.runId, info);
    const token = claimToken(info);
    if (w.state === 'crashed') return NEVER;
    if (info.point === 'after-claim') {
      w.claims.add(tag);
      for (const f of [...this.frozen])
        if (f.release === 'takeover' && f.runId === info.runId && f.epoch < token) this.release(f);
      // A deaf worker's other claims are never heartbeated: their lease loss is our doing.
      if (w.state === 'deaf') this.faulted.add(tag);
    }
    if (info.detail === 'park') this.parked.add(tag);
    const i = this.faults.findIndex((f, j) => !this.fired[j] && matches(f, info) && this.hits[j]++ >= f.nth);
    if (i < 0) return;
    this.fired[i] = true;
    const f = this.faults[i];
    if (f.kind === 'hold') return this.during(i, f.holdMs);
    this.faulted.add(tag);
    if (f.kind === 'failover') return this.failover(info.runId);
    if (f.kind === 'lost-suffix') {
      // Not awaited: the run goes on committing on the primary until it stops.
      const outage = this.lostSuffix(f.holdMs).finally(() => {
        if (this.outage === outage) this.outage = null;
      });
      this.outage = outage;
      return;
    }
    if (f.kind === 'drain') {
      // SIGTERM while this call is in flight: the drain (no grace) hands the run over, due at the
      // lease's end since the call is live; the call goes on for holdMs, then its commit is refused.
      for (const c of w.claims) this.faulted.add(c);
      w.state = 'drained';
      this.drain(w);
      this.crashed(w); // a replacement pod comes up
      return new Promise<void>((r) => setTimeout(r, f.holdMs));
    }
    for (const c of w.claims) this.faulted.add(c);
    if (f.kind === 'crash') {
      w.state = 'crashed';
      this.crashed(w);
      return NEVER;
    }
    w.state = f.kind === 'deaf' ? 'deaf' : 'stalled';
    return new Promise<void>((open) =>
      this.frozen.push({
        fault: i,
        runId: info.runId,
        epoch: token,
        worker: w,
        release: f.kind === 'deaf' ? 'takeover' : f.release,
        open,
      }),
    );
  };

  /** Wakes a zombie: its worker is alive again (heartbeats, claims) and its run goes on. */
  release(f: Frozen): void {
    const at = this.frozen.indexOf(f);
    if (at < 0) return;
    this.frozen.splice(at, 1);
    if (['stalled', 'deaf'].includes(f.worker.state) && !this.frozen.some((o) => o.worker === f.worker))
      f.worker.state = 'live';
    f.open();
  }

  releaseAll(): number {
    const all = [...this.frozen];
    all.forEach((f) => this.release(f));
    return all.length;
  }
}

function matches(f: Fault, info: ModelPointInfo): boolean {
  const at = f.where.indexOf(':');
  const point = at < 0 ? f.where : f.where.slice(0, at);
  if (point !== info.point) return false;
  return at < 0 || (info.detail ?? '').startsWith(f.where.slice(at + 1));
}
