import type { DurableNames } from '../durable-names';

/**
 * A CTE `closed`: the commands of a run that ends cancelled ($cond on CTE `from`) that were never sent
 * and never will be (awaiting approval, or approved but not dispatched yet) are closed as `rejected`
 * (resolution `run_cancelled`): nobody has to decide them any more, and retention can prune the run.
 */
export function closeUnsentCommands(t: DurableNames, cond: string, from: string): string {
  return `closed as (
  update ${t.commands} c
     set status = 'rejected', resolution = 'run_cancelled', updated_at = now(),
         error = '{"message":"the run was cancelled before this command was sent"}'::jsonb
    from ${from} where c.run_id = ${from}.id and ${cond} and c.status in ('awaiting_approval', 'approved')
)`;
}
