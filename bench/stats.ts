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

/**
 * Median, min and max of one figure over the repeats (or of a ratio over its pairs of blocks), and the
 * interquartile range: `q1`-`q3` holds the middle half of the samples, which is what to read beside the
 * median when there are many of them (min and max are the two most extreme blocks).
 */
export interface Spread {
  median: number;
  min: number;
  max: number;
  q1: number;
  q3: number;
  samples: number[];
}

/** Quartile by linear interpolation between the closest ranks (q in 0..1), of an ascending array. */
function interpolated(sorted: number[], q: number): number {
  if (!sorted.length) return NaN;
  const at = q * (sorted.length - 1);
  const lo = Math.floor(at);
  const hi = Math.ceil(at);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo);
}

export function spread(samples: number[]): Spread {
  const s = samples.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  return {
    median: median(s),
    min: s.length ? s[0] : NaN,
    max: s.length ? s[s.length - 1] : NaN,
    q1: interpolated(s, 0.25),
    q3: interpolated(s, 0.75),
    samples,
  };
}

/** `median (q1-q3, min-max)` with `d` decimals, or '-'. */
export function formatSpread(x: Spread | undefined, d = 2): string {
  if (!x || !Number.isFinite(x.median)) return '-';
  const f = (v: number) => v.toFixed(d);
  return `${f(x.median)} (IQR ${f(x.q1)}-${f(x.q3)}, ${f(x.min)}-${f(x.max)})`;
}

/**
 * One ratio per pair of neighbouring blocks (`num[i] / den[i]`: block i of one side and block i of the
 * other, measured one right after the other), and their spread: the way every headline ratio is formed.
 */
export function pairRatios(num: number[], den: number[]): Spread {
  const per: number[] = [];
  for (let i = 0; i < Math.min(num.length, den.length); i++) {
    if (Number.isFinite(num[i]) && Number.isFinite(den[i]) && den[i] !== 0) per.push(num[i] / den[i]);
  }
  return spread(per);
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
