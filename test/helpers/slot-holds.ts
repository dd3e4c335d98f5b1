/**
 * Concurrency slots as the event trail shows them (docs/FLOW-CONTROL.md): a hold starts at the
 * `run.claimed` event that lists the slot (the claim statement takes it) and ends at the run's next
 * event of a statement that takes it out of `running` (that statement frees it). Event ids order
 * statements that depend on each other (a take sees the free committed), not timestamps
 * (transaction starts). Shared by the multi-process limits test and the model test's invariants.
 */

/** Event types written by the statements that take a run out of `running` (and free its slots). */
export const LEAVES_RUNNING = new Set([
  'run.succeeded',
  'run.failed',
  'run.dead_lettered',
  'run.cancelled',
  'run.held',
  'run.released',
  'run.retry_scheduled',
  'run.reconciled',
  'run.sleeping',
  'run.waiting_for_signal',
  'model.budget_wait',
  'command.approval_requested',
  'command.in_doubt',
]);

/**
 * The parks after which a run of a kind with `holdSlotWhileWaiting` keeps its slots (the park
 * statement leaves them; its next claim takes them back). A wait for a child frees them anyway.
 */
const KEPT_BY_PARK = new Set([
  'run.sleeping',
  'run.waiting_for_signal',
  'model.budget_wait',
  'command.approval_requested',
  'command.in_doubt',
]);

/** Whether the event is a park that leaves a holding run's slots with it. */
const keeps = (e: TrailEvent): boolean =>
  KEPT_BY_PARK.has(e.event_type) &&
  !(e.event_type === 'run.waiting_for_signal' && String(e.payload?.name ?? '').startsWith('$child:'));

/** One slot held by one run at one epoch, between two event ids. */
export interface Hold {
  runId: string;
  epoch: number;
  /** `["kind"]` or `["kind","key"]` (JSON). */
  scope: string;
  /** `<scope>#<n>`. */
  slot: string;
  n: number;
  from: number;
  to: number;
}

/** An event row as the trail holds it (id and epoch may come back from pg as strings). */
export interface TrailEvent {
  id: string | number;
  run_id: string;
  event_type: string;
  epoch: string | number;
  payload: any;
}

/**
 * Every hold in the trail (`to` is Infinity for one never ended), in the order the claims were written.
 * `holding(runId)`: the run's kind keeps its slots while it waits (its parks do not end a hold; the
 * claim that takes them back ends it and starts the next one of the same slot).
 */
export function holdsOf(events: TrailEvent[], holding: (runId: string) => boolean = () => false): Hold[] {
  const open = new Map<string, Hold[]>();
  const holds: Hold[] = [];
  for (const e of [...events].sort((a, b) => Number(a.id) - Number(b.id))) {
    const id = Number(e.id);
    if (e.event_type === 'run.claimed' && e.payload?.slots) {
      // A claim that takes back the slots a park kept ends their last hold where the next begins.
      for (const h of open.get(e.run_id) ?? []) h.to = id;
      const mine = (e.payload.slots as [string[], number][]).map(([scope, n]) => ({
        runId: e.run_id,
        epoch: Number(e.epoch),
        scope: JSON.stringify(scope),
        slot: `${JSON.stringify(scope)}#${n}`,
        n,
        from: id,
        to: Infinity,
      }));
      open.set(e.run_id, mine);
      holds.push(...mine);
    } else if (
      (LEAVES_RUNNING.has(e.event_type) || e.event_type === 'run.claimed') &&
      open.has(e.run_id) &&
      !(holding(e.run_id) && keeps(e))
    ) {
      for (const h of open.get(e.run_id)!) h.to = id;
      open.delete(e.run_id);
    }
  }
  return holds;
}

/** The most holds of `scope` open at once, in event-id order. */
export function peak(holds: Hold[], scope: string): number {
  const edges = holds
    .filter((h) => h.scope === scope)
    .flatMap((h) => [
      [h.from, 1],
      [h.to, -1],
    ])
    .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let max = 0;
  for (const [, d] of edges) max = Math.max(max, (now += d));
  return max;
}

/**
 * What the trail shows against the limits: a scope over its cap at some point, a slot numbered above
 * its cap, a slot with two holders at once, a hold never ended. `capOf` gives a scope's cap.
 */
export function slotViolations(holds: Hold[], capOf: (scope: string) => number): string[] {
  const out: string[] = [];
  for (const scope of new Set(holds.map((h) => h.scope))) {
    const most = peak(holds, scope);
    if (most > capOf(scope))
      out.push(`slots: ${most} runs of ${scope} held slots at once (cap ${capOf(scope)})`);
  }
  const bySlot = new Map<string, Hold[]>();
  for (const h of holds) bySlot.set(h.slot, [...(bySlot.get(h.slot) ?? []), h]);
  for (const [slot, hs] of bySlot) {
    if (hs[0].n > capOf(hs[0].scope))
      out.push(`slots: ${slot} was taken above the cap ${capOf(hs[0].scope)}`);
    for (let i = 1; i < hs.length; i++)
      if (hs[i].from < hs[i - 1].to)
        out.push(
          `slots: ${slot} taken by run ${hs[i].runId} (event ${hs[i].from}) while run ${hs[i - 1].runId} held it until event ${hs[i - 1].to}`,
        );
  }
  for (const h of holds.filter((x) => x.to === Infinity))
    out.push(`slots: run ${h.runId} never freed ${h.slot} (epoch ${h.epoch})`);
  return out;
}

/**
 * Begins over a rate limit, from the trail: the `run.claimed` events that took a rate token (their
 * `created_at` is the claim statement's `now()`, the clock the token was spent by), grouped by scope;
 * a violation wherever more than `limit` fall in one window of `periodMs`.
 */
export function beginsOverRate(
  claims: Array<{ created_at: Date | string; payload: any }>,
  limit: number,
  periodMs: number,
): string[] {
  const byScope = new Map<string, number[]>();
  for (const c of claims) {
    if (!c.payload?.rateToken) continue;
    const scope = JSON.stringify(c.payload.rateToken[0]);
    byScope.set(scope, [...(byScope.get(scope) ?? []), new Date(c.created_at).getTime()]);
  }
  const out: string[] = [];
  for (const [scope, times] of byScope) {
    times.sort((a, b) => a - b);
    for (let i = 0, j = 0; i < times.length; i++) {
      while (times[i] - times[j] >= periodMs) j++;
      if (i - j + 1 > limit)
        out.push(
          `rate: ${i - j + 1} runs of ${scope} began within ${periodMs} ms (limit ${limit}), the last at ${new Date(times[i]).toISOString()}`,
        );
    }
  }
  return out;
}
