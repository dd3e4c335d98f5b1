import type { StepMetadata } from '../../interfaces/step-options.interface';
import { abortableSleep } from '../retry';
import type { StepEnv } from './step-env';

/**
 * A call over its model budget: not an error of the step. It leaves the step's tracked promise as its
 * value (see `executeStep`), and the run parks until the budget's window allows the call.
 * @internal
 */
export class BudgetWait {
  /** Not retried inside the claim: the run parks instead. */
  readonly retryable = false;
  constructor(
    readonly budget: string,
    readonly waitMs: number,
  ) {}
}

/**
 * Admits one attempt of `meta`'s step on its budget: the admitted call's row (its estimate, corrected
 * after the call), or a BudgetWait thrown when the window is full. In a cancelled run's cleanup, which
 * may not park, the worker waits for the window itself and asks again.
 */
export async function admit(env: StepEnv, meta: StepMetadata, index: number): Promise<string> {
  const name = meta.budget!;
  const budget = env.options.budgets[name];
  for (;;) {
    const charge = await env.store
      .chargeBudget(name, budget, env.runId, index)
      .catch((err) => Promise.reject(env.control.storeFailed(err, 'a budget charge')));
    if (charge.admitted) return charge.useId;
    if (!env.control.inCleanup) throw new BudgetWait(name, charge.waitMs);
    await abortableSleep(charge.waitMs, env.control.signal);
  }
}

/**
 * Parks the run until the budget's window allows the call (database clock), holding no worker, once
 * the run's other live calls have settled (as every park does). The step runs again on the next claim,
 * and is charged again. Returns the stop error to throw.
 */
export async function parkForBudget(
  env: StepEnv,
  meta: StepMetadata,
  index: number,
  w: BudgetWait,
): Promise<never> {
  await env.control.quiesce();
  const reason = `over model budget "${w.budget}"`;
  const records = env.log.takePending();
  const parked = await env.fenced(
    () =>
      env.store.park(env.fence, {
        delayMs: w.waitMs,
        attemptsDelta: env.control.attemptsDelta('give-back'),
        reason,
        event: 'model.budget_wait',
        payload: { step: index, name: meta.name, budget: w.budget, waitMs: w.waitMs },
        records,
      }),
    'park',
    records,
  );
  throw env.control.halt({ kind: 'parked', reason, until: parked.availableAt, forOperator: false });
}
