import { Client } from 'pg';
import type { FakeTarget } from '../helpers/fake-target';
import type { ChaosOptions } from './fault-plan';
import type { InvariantResult } from './invariants';

/** What one chaos run did and whether every invariant held. */
export interface ChaosReport {
  options: ChaosOptions;
  durationMs: number;
  runs: {
    total: number;
    succeeded: number;
    parked: number;
    deadLettered: number;
    failed: number;
    lost: number;
  };
  faults: Record<string, number>;
  reExecutions: {
    stepExecutions: number;
    distinctSteps: number;
    repeatedBeforeCommit: number;
    claims: number;
  };
  commands: {
    keys: number;
    effects: number;
    duplicateEffects: number;
    inDoubt: number;
    resolvedByLookupFound: number;
    redispatchedWithKey: number;
  };
  /**
   * Time to recover per kill, from the trail: for each epoch a dead lease ended (`run.reconciled`),
   * from its worker's last event (an upper bound: the worker may have lived on after it) to the next
   * claim of the run. Milliseconds.
   */
  recovery: {
    kills: number;
    p50Ms: number | null;
    p99Ms: number | null;
    maxMs: number | null;
    /** The part after the reconciler took the lease back (`run.reconciled` → next claim). */
    afterReclaimP50Ms: number | null;
    afterReclaimP99Ms: number | null;
  };
  invariants: Array<{ name: string; ok: boolean; violations: number; sample: unknown[] }>;
  ok: boolean;
}

/** Recovery per dead lease (see ChaosReport.recovery), in one statement over the event trail. */
const RECOVERY_SQL = `
with dead as (
  select run_id, epoch, created_at as reclaimed from ai_events where event_type = 'run.reconciled'
), alive as (
  select d.run_id, d.epoch, d.reclaimed, max(e.created_at) as at
    from dead d join ai_events e on e.run_id = d.run_id and e.epoch = d.epoch and e.event_type <> 'run.reconciled'
   group by 1, 2, 3
), back as (
  select a.*, (select min(c.created_at) from ai_events c
                where c.run_id = a.run_id and c.epoch = a.epoch + 1 and c.event_type = 'run.claimed') as claimed
    from alive a
), ms as (
  select extract(epoch from claimed - at) * 1000 as total, extract(epoch from claimed - reclaimed) * 1000 as after
    from back where claimed is not null
)
select count(*)::int as kills,
       percentile_cont(0.5) within group (order by total) as p50,
       percentile_cont(0.99) within group (order by total) as p99,
       max(total)::float8 as max,
       percentile_cont(0.5) within group (order by after) as after_p50,
       percentile_cont(0.99) within group (order by after) as after_p99
  from ms`;

export async function summarize(
  url: string,
  options: ChaosOptions,
  faults: Record<string, number>,
  invariants: InvariantResult[],
  pay: FakeTarget,
  notify: FakeTarget,
  durationMs: number,
): Promise<ChaosReport> {
  const c = new Client({ connectionString: url });
  await c.connect();
  const one = async (sql: string) => (await c.query(sql)).rows[0];
  try {
    const runs = await one(`
      select count(*)::int as total,
             count(*) filter (where status = 'succeeded')::int as succeeded,
             count(*) filter (where status = 'waiting' and parked_reason is not null)::int as parked,
             count(*) filter (where status = 'dead_lettered')::int as dead_lettered,
             count(*) filter (where status in ('failed', 'cancelled'))::int as failed
        from ai_runs`);
    const steps = await one(`
      select count(*)::int as executions, count(distinct (run_id, step))::int as distinct_steps from step_effects`);
    const claims = await one(`select count(*)::int as n from ai_events where event_type = 'run.claimed'`);
    const cmds = await one(`select count(*)::int as n from ai_commands`);
    const inDoubt = await one(`
      select count(distinct k)::int as n from ai_events, jsonb_array_elements_text(payload->'inDoubt') k
       where event_type = 'run.reconciled'`);
    const lookups = await one(
      `select count(*)::int as n from ai_events where event_type = 'command.resolved'`,
    );
    const rec = await one(RECOVERY_SQL);
    const ms = (v: unknown) => (v === null || v === undefined ? null : Math.round(Number(v)));
    const effects = { ...pay.effects(), ...notify.effects() };
    const requests = notify.requests();
    const lost = runs.total - runs.succeeded - runs.parked - runs.dead_lettered - runs.failed;
    const inv = invariants.map((i) => ({
      name: i.name,
      ok: i.violations.length === 0,
      violations: i.violations.length,
      sample: i.violations.slice(0, 3),
    }));
    return {
      options,
      durationMs,
      runs: {
        total: runs.total,
        succeeded: runs.succeeded,
        parked: runs.parked,
        deadLettered: runs.dead_lettered,
        failed: runs.failed,
        lost,
      },
      faults,
      reExecutions: {
        stepExecutions: steps.executions,
        distinctSteps: steps.distinct_steps,
        repeatedBeforeCommit: steps.executions - steps.distinct_steps,
        claims: claims.n,
      },
      commands: {
        keys: cmds.n,
        effects: Object.values(effects).reduce((a, b) => a + b, 0),
        duplicateEffects: Object.values(effects).filter((n) => n > 1).length,
        inDoubt: inDoubt.n,
        resolvedByLookupFound: lookups.n,
        redispatchedWithKey: Object.values(requests).filter((n) => n > 1).length,
      },
      recovery: {
        kills: rec.kills,
        p50Ms: ms(rec.p50),
        p99Ms: ms(rec.p99),
        maxMs: ms(rec.max),
        afterReclaimP50Ms: ms(rec.after_p50),
        afterReclaimP99Ms: ms(rec.after_p99),
      },
      invariants: inv,
      ok: lost === 0 && inv.every((i) => i.ok),
    };
  } finally {
    await c.end();
  }
}

/** The report as a plain-text table. */
export function formatReport(r: ChaosReport): string {
  const rows: Array<[string, string | number]> = [
    ['runs', r.runs.total],
    ['  succeeded', r.runs.succeeded],
    ['  parked for an operator', r.runs.parked],
    ['  dead-lettered / failed', `${r.runs.deadLettered} / ${r.runs.failed}`],
    ['  lost', r.runs.lost],
    ...Object.entries(r.faults).map(([k, v]) => [`fault: ${k}`, v] as [string, number]),
    ['claims (epochs) in all', r.reExecutions.claims],
    [
      'step executions / distinct steps',
      `${r.reExecutions.stepExecutions} / ${r.reExecutions.distinctSteps}`,
    ],
    ['  re-executed before their commit', r.reExecutions.repeatedBeforeCommit],
    ['command keys / effects at targets', `${r.commands.keys} / ${r.commands.effects}`],
    ['  keys with a duplicate effect', r.commands.duplicateEffects],
    ['  in doubt after a dead lease', r.commands.inDoubt],
    ['    settled by lookup (found)', r.commands.resolvedByLookupFound],
    ['    re-sent with the same key', r.commands.redispatchedWithKey],
    [
      'time to recover per kill (p50 / p99 / max)',
      `${r.recovery.p50Ms ?? '-'} / ${r.recovery.p99Ms ?? '-'} / ${r.recovery.maxMs ?? '-'} ms over ${r.recovery.kills} dead leases`,
    ],
    [
      '  of which after the lease was taken back (p50 / p99)',
      `${r.recovery.afterReclaimP50Ms ?? '-'} / ${r.recovery.afterReclaimP99Ms ?? '-'} ms`,
    ],
    ['duration', `${(r.durationMs / 1000).toFixed(1)} s`],
  ];
  const w = Math.max(...rows.map(([k]) => k.length));
  const lines = rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`);
  lines.push('', 'invariants:');
  for (const i of r.invariants)
    lines.push(
      `  ${i.ok ? 'OK  ' : 'FAIL'} ${i.name}${i.ok ? '' : ` (${i.violations}): ${JSON.stringify(i.sample)}`}`,
    );
  lines.push('', r.ok ? 'ALL INVARIANTS HOLD' : 'INVARIANTS BROKEN');
  return lines.join('\n');
}
