import type { CrashPointName } from '../../src/engine/crash-points';

/** Every named crash point; the plan cycles through them so each is hit. */
export const CRASH_POINTS: CrashPointName[] = [
  'after-model-output',
  'before-step-commit',
  'after-step-commit',
  'after-command-reserve',
  'after-command-dispatch',
  'before-heartbeat',
  'during-drain',
];

export type Fault =
  | { at: number; kind: 'kill'; worker: number }
  | { at: number; kind: 'crash-point'; worker: number; point: CrashPointName }
  | { at: number; kind: 'stall'; worker: number; ms: number }
  | { at: number; kind: 'terminate-connections' }
  | { at: number; kind: 'pg-restart'; downMs: number };

export interface ChaosOptions {
  runs: number;
  kills: number;
  stalls: number;
  pgRestarts: number;
  terminates: number;
  seed: number;
  workers: number;
  /** Faults are spread over this window (ms from the start). */
  windowMs: number;
}

/** A small deterministic PRNG (mulberry32): the same seed gives the same fault plan. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The fault plan: half the kills are SIGKILLs at random moments, half are workers started with a named
 * crash point armed (cycling through all seven); stalls SIGSTOP a worker past its lease TTL; connection
 * cuts and PostgreSQL restarts land at random moments. Sorted by time.
 */
export function planFaults(o: ChaosOptions, leaseTtlMs: number): Fault[] {
  const rand = prng(o.seed);
  const at = () => Math.round(300 + rand() * o.windowMs);
  const worker = () => Math.floor(rand() * o.workers);
  const faults: Fault[] = [];
  const crashKills = Math.floor(o.kills / 2);
  for (let i = 0; i < o.kills - crashKills; i++) faults.push({ at: at(), kind: 'kill', worker: worker() });
  for (let i = 0; i < crashKills; i++) {
    faults.push({
      at: at(),
      kind: 'crash-point',
      worker: worker(),
      point: CRASH_POINTS[i % CRASH_POINTS.length],
    });
  }
  for (let i = 0; i < o.stalls; i++)
    faults.push({ at: at(), kind: 'stall', worker: worker(), ms: leaseTtlMs * 2 });
  for (let i = 0; i < o.terminates; i++) faults.push({ at: at(), kind: 'terminate-connections' });
  for (let i = 0; i < o.pgRestarts; i++) faults.push({ at: at(), kind: 'pg-restart', downMs: 1000 });
  return faults.sort((a, b) => a.at - b.at);
}
