import { Client } from 'pg';
import { TRAIL } from '../helpers/event-trail';

/** One invariant: its name and the rows that break it (empty = holds). */
export interface InvariantResult {
  name: string;
  violations: unknown[];
}

const STEP_EVENTS = `('run.checkpoint_saved', 'tool.command_succeeded', 'tool.command_failed', 'tool.command_rejected', 'command.resolved', 'signal.received', 'signal.timed_out')`;

/**
 * The invariants of DESIGN.md, checked from the database (and the targets' own effect counts, passed
 * in). Each query returns the offending rows, so a failure says exactly which run broke what.
 */
export async function checkInvariants(
  url: string,
  targetEffects: Record<string, number>,
): Promise<InvariantResult[]> {
  const c = new Client({ connectionString: url });
  await c.connect();
  const q = async (sql: string) => (await c.query(sql)).rows;
  try {
    return [
      {
        name: 'every run is terminal or parked for an operator with a stated reason',
        violations: await q(`
          select id, status, parked_reason from ai_runs
           where status not in ('succeeded', 'failed', 'cancelled', 'dead_lettered')
             and not (status = 'waiting' and parked_reason is not null and available_at = 'infinity')`),
      },
      {
        name: 'no step whose checkpoint committed ran again',
        violations: await q(`
          select e.run_id, e.step, e.created_at as executed_at, cp.created_at as committed_at
            from step_effects e
            join ai_checkpoints cp on cp.run_id = e.run_id and cp.step_name = e.step
           where e.created_at > cp.created_at`),
      },
      {
        name: 'every command key has at most one effect at its target',
        violations: Object.entries(targetEffects)
          .filter(([, n]) => n > 1)
          .map(([key, n]) => ({ key, effects: n })),
      },
      {
        name: 'every succeeded command has exactly one effect at its target',
        violations: (await q(`select idempotency_key from ai_commands where status = 'succeeded'`))
          .filter((r) => targetEffects[r.idempotency_key] !== 1)
          .map((r) => ({ key: r.idempotency_key, effects: targetEffects[r.idempotency_key] ?? 0 })),
      },
      {
        name: 'per run, epochs only rise along the event trail',
        violations: await q(`
          select run_id, id, epoch, prev_epoch from (
            select run_id, id, epoch, lag(epoch) over (partition by run_id order by id) as prev_epoch from ${TRAIL} t) e
           where epoch < prev_epoch`),
      },
      {
        name: "nothing from an epoch landed after the next epoch's claim",
        violations: await q(`
          select e.run_id, e.id, e.event_type, e.epoch, c.id as next_claim
            from ${TRAIL} e join ${TRAIL} c
              on c.run_id = e.run_id and c.event_type = 'run.claimed' and c.epoch = e.epoch + 1
           where e.id > c.id
          union all
          select cp.run_id, null, 'checkpoint ' || cp.step_name, cp.epoch, c.id
            from ai_checkpoints cp join ${TRAIL} c
              on c.run_id = cp.run_id and c.event_type = 'run.claimed' and c.epoch = cp.epoch + 1
           where cp.created_at > c.created_at`),
      },
      {
        name: 'each claim (epoch) has exactly one run.claimed event and one owner',
        violations: await q(`
          select r.id, r.epoch, count(e.id) as claims, count(distinct e.epoch) as epochs
            from ai_runs r left join ${TRAIL} e on e.run_id = r.id and e.event_type = 'run.claimed'
           group by r.id, r.epoch
          having count(e.id) <> r.epoch or count(distinct e.epoch) <> r.epoch`),
      },
      {
        name: 'every committed step or command has exactly one event, and every such event its checkpoint',
        violations: await q(`
          select cp.run_id, cp.step_index, cp.step_name, count(e.id) as events
            from ai_checkpoints cp
            left join ${TRAIL} e on e.run_id = cp.run_id and e.epoch = cp.epoch
                 and e.event_type in ${STEP_EVENTS} and (e.payload->>'step')::int = cp.step_index
           where cp.step_name not like '$%' or cp.step_name like '$signal:%'
           group by cp.run_id, cp.step_index, cp.step_name
          having count(e.id) <> 1
          union all
          select e.run_id, (e.payload->>'step')::int, e.event_type, 0
            from ${TRAIL} e
           where e.event_type in ${STEP_EVENTS}
             and not exists (select 1 from ai_checkpoints cp where cp.run_id = e.run_id and cp.epoch = e.epoch
                               and cp.step_index = (e.payload->>'step')::int)`),
      },
      {
        name: 'every finished run has exactly one terminal event, and it is the last one',
        violations: await q(`
          select r.id, r.status,
                 count(*) filter (where e.event_type in ('run.succeeded', 'run.failed', 'run.cancelled', 'run.dead_lettered')) as terminal_events,
                 (array_agg(e.event_type order by e.id desc))[1] as last_event
            from ai_runs r join ${TRAIL} e on e.run_id = r.id
           where r.status in ('succeeded', 'failed', 'cancelled', 'dead_lettered')
           group by r.id, r.status
          having count(*) filter (where e.event_type in ('run.succeeded', 'run.failed', 'run.cancelled', 'run.dead_lettered')) <> 1
              or (array_agg(e.event_type order by e.id desc))[1] not in ('run.succeeded', 'run.failed', 'run.cancelled', 'run.dead_lettered', 'signal.sent')`),
      },
      {
        name: 'no run holds an expired lease once the reconciler has run',
        violations: await q(
          `select id, worker_id, lease_expires_at from ai_runs where status = 'running' and lease_expires_at < now()`,
        ),
      },
    ];
  } finally {
    await c.end();
  }
}
