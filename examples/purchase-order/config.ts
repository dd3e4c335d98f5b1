/**
 * The scenario in the chapter's units, and how the demo scales it down. Every latency is given in
 * "chapter seconds" (a run takes about six minutes in the incident); `timeScaleMs` says how many
 * real milliseconds one chapter second lasts in the demo (40 ms: a run takes about 14 s).
 */

/**
 * Latency of each step in chapter seconds (sum ≈ 343 s plus overhead: "roughly six minutes"). Step 7,
 * marking the account active, is a write to the app's own database (accounts.ts): milliseconds, no
 * simulated latency.
 */
export const CHAPTER_SECONDS = {
  /** The model parses the buyer's request (about 14,000 input tokens). */
  parseRequest: 20,
  resolveSupplier: 15,
  /** 240 line items × 180 ms per price lookup, priced in batches of `PRICE_BATCH`. */
  priceLookup: 0.18,
  /** The external credit vendor (a call with a ninety-second timeout). */
  creditCheck: 75,
  chargeCard: 30,
  bookShipment: 90,
  notifyBuyer: 40,
  notifySupplier: 40,
} as const;

/** The chapter's deployment settings, in chapter seconds. */
export const CHAPTER_DEPLOY = {
  /** SIGTERM grace period of a pod. */
  gracePeriod: 30,
  /** Execution lease and its heartbeat. */
  leaseTtl: 30,
  heartbeat: 10,
  /** Reconciler sweep and first retry backoff. */
  reconcilerInterval: 5,
  backoffBase: 1,
};

/** Line items per quote, and how many are priced per request (one intra-step cursor move each). */
export const LINE_ITEMS = 240;
export const PRICE_BATCH = 24;

/** Prices and token counts of the simulated vendors. */
export const CREDIT_ENQUIRY_EUR = 0.4;
export const PROMPT_TOKENS_PER_PARSE = 14_000;

/** What the chapter reports for 1,900 runs restarted at step one. */
export const CHAPTER_FIGURES = {
  runs: 1900,
  duplicateCreditEnquiries: 1100,
  duplicateCreditEur: 440,
  creditSpendEur: 760,
  runsThatHadCharged: 60,
  doubleCharges: 41,
  reSpentTokens: 1900 * PROMPT_TOKENS_PER_PARSE,
};

/** Where the workers find the simulated services, and how fast those are. Passed to every process. */
export interface ServiceSettings {
  /** Base URL of the loopback vendor hub (credit bureau, payments, carrier, notifications, catalog). */
  vendorsUrl: string;
  /** Base URL of the loopback OpenAI-compatible endpoint (without `/v1`). */
  modelUrl: string;
  /** Model name sent to the endpoint. */
  model: string;
}

/** Real milliseconds for `chapterSeconds` at this scale, at least 1 ms. */
export function scaled(chapterSeconds: number, timeScaleMs: number): number {
  return Math.max(1, Math.round(chapterSeconds * timeScaleMs));
}

/**
 * The demo's worker settings at a time scale. The lease has a floor of 6 s: scaled down further it
 * would sit below the event-loop pauses a busy 2-core machine shows, and live workers would lose runs
 * they are still driving (the chapter's "too short" end of the TTL trade-off). It also stays above
 * drain + heartbeat, because a draining worker no longer renews its leases.
 */
export function workerTimings(timeScaleMs: number) {
  const graceMs = Math.max(1000, scaled(CHAPTER_DEPLOY.gracePeriod, timeScaleMs));
  /** What a worker spends finishing in-flight steps; the rest of the grace period is for handing back. */
  const drainMs = Math.round(graceMs * 0.5);
  const heartbeatMs = Math.min(1000, Math.max(500, scaled(CHAPTER_DEPLOY.heartbeat, timeScaleMs)));
  const leaseTtlMs = Math.max(
    6000,
    scaled(CHAPTER_DEPLOY.leaseTtl, timeScaleMs),
    drainMs + heartbeatMs + 3000,
  );
  return {
    graceMs,
    drainMs,
    leaseTtlMs,
    heartbeatMs,
    reconcilerIntervalMs: Math.max(200, scaled(CHAPTER_DEPLOY.reconcilerInterval, timeScaleMs)),
    backoffBaseMs: Math.max(20, scaled(CHAPTER_DEPLOY.backoffBase, timeScaleMs)),
  };
}

/** Nominal length of one run at a time scale (sum of the step latencies). */
export function nominalRunMs(timeScaleMs: number): number {
  const s = CHAPTER_SECONDS;
  const total =
    s.parseRequest +
    s.resolveSupplier +
    s.priceLookup * LINE_ITEMS +
    s.creditCheck +
    s.chargeCard +
    s.bookShipment +
    s.notifyBuyer +
    s.notifySupplier;
  return Math.round(total * timeScaleMs);
}
