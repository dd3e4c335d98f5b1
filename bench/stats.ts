/** Small statistics helpers for the benchmark (no dependencies). */

/** Nearest-rank quantile of an ascending array (q in 0..1). */
export function quantile(sorted: number[], q: number): number {
  if (!sorted.length) return NaN;
  const rank = Math.ceil(q * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

/** Median of any array (mean of the two middle values for an even count). */
export function median(values: number[]): number {
  if (!values.length) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** p50 / p99 / mean of latency samples in milliseconds. */
export interface LatencySummary {
  n: number;
  p50: number;
  p99: number;
  mean: number;
}

export function latency(samples: number[]): LatencySummary {
  const s = [...samples].sort((a, b) => a - b);
  return {
    n: s.length,
    p50: quantile(s, 0.5),
    p99: quantile(s, 0.99),
    mean: s.reduce((a, b) => a + b, 0) / (s.length || 1),
  };
}

/** Median, min and max of one figure over the repeats. */
export interface Spread {
  median: number;
  min: number;
  max: number;
  samples: number[];
}

export function spread(samples: number[]): Spread {
  return {
    median: median(samples),
    min: samples.length ? Math.min(...samples) : NaN,
    max: samples.length ? Math.max(...samples) : NaN,
    samples,
  };
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Steady-state throughput of a claim/step/finish loop with N in flight. The window opens at the first
 * finished run (the pipeline is full and cycling) and closes at the last claim that got a run (from
 * then on fewer than N are in flight: the tail). Steps and runs completed inside it, per second.
 * Falls back to the whole span when the window is too short to mean anything.
 */
export class SteadyMeter {
  private firstClaim = NaN;
  private lastClaim = NaN;
  private readonly stepTimes: number[] = [];
  private readonly finishTimes: number[] = [];

  claimed(n: number): void {
    if (n <= 0) return;
    const t = performance.now();
    if (Number.isNaN(this.firstClaim)) this.firstClaim = t;
    this.lastClaim = t;
  }

  step(): void {
    this.stepTimes.push(performance.now());
  }

  finished(): void {
    this.finishTimes.push(performance.now());
  }

  result(): SteadyResult {
    let from = this.finishTimes[0];
    let to = this.lastClaim;
    const steady = to - from >= 100;
    if (!steady) {
      from = this.firstClaim;
      to = this.finishTimes[this.finishTimes.length - 1];
    }
    const inWindow = (ts: number[]) => ts.filter((t) => t > from && t <= to).length;
    return { windowMs: to - from, steady, steps: inWindow(this.stepTimes), runs: inWindow(this.finishTimes) };
  }
}

/** Step commits and finished runs inside the steady-state window of one block. */
export interface SteadyResult {
  windowMs: number;
  /** False when the window was too short and the whole span was used instead. */
  steady: boolean;
  steps: number;
  runs: number;
}
