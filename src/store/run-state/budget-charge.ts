import type { ResolvedModelBudget } from '../../interfaces/budget.interface';
import type { SqlText } from '../durable-names';
import type { StoreContext } from './fence';

/**
 * Admits one call on a model budget, in one round trip (the function `ai_budget_charge`, migration
 * ModelBudgets1765600000000): the budget's row is locked, the window counted with a snapshot that sees
 * every charge committed before, and the call inserted when it fits.
 * $1 name, $2 requests, $3 tokens, $4 period ms, $5 estimate, $6 run id, $7 step index
 */
export const CHARGE_BUDGET_SQL: SqlText = (t) =>
  `select admitted, use_id, wait_ms from ${t.prefix}ai_budget_charge($1, $2, $3, $4, $5, $6, $7)`;

/** A call's real token usage replaces its estimate. $1 use id, $2 tokens */
export const CORRECT_BUDGET_SQL: SqlText = (t) => `update ${t.budgetUse} set tokens = $2 where id = $1`;

/** What a charge decided: admitted (with the row to correct later), or how long until it fits. */
export type BudgetCharge = { admitted: true; useId: string } | { admitted: false; waitMs: number };

/** Admits one call of run `runId`'s step `step` on budget `name`, or says how long to wait. */
export async function chargeBudget(
  s: StoreContext,
  name: string,
  b: ResolvedModelBudget,
  runId: string,
  step: number,
): Promise<BudgetCharge> {
  const { rows } = await s.db.query<{ admitted: boolean; use_id: string | null; wait_ms: number }>(
    CHARGE_BUDGET_SQL,
    [name, b.requests, b.tokens, b.periodMs, b.estimateTokens, runId, step],
    'dx_charge_budget',
  );
  const r = rows[0];
  return r.admitted
    ? { admitted: true, useId: String(r.use_id) }
    : { admitted: false, waitMs: Math.ceil(r.wait_ms) };
}

/** Charges a call its real usage (`tokens`) in place of its estimate. */
export async function correctBudget(s: StoreContext, useId: string, tokens: number): Promise<void> {
  await s.db.query(CORRECT_BUDGET_SQL, [useId, tokens], 'dx_correct_budget');
}

/**
 * The tokens a model step's output says it used: `usage.total_tokens`, else the sum of its input and
 * output (or prompt and completion) tokens; null when it says nothing countable.
 */
export function usedTokens(output: unknown): number | null {
  const usage = output && typeof output === 'object' ? (output as { usage?: unknown }).usage : undefined;
  if (!usage || typeof usage !== 'object') return null;
  const u = usage as Record<string, unknown>;
  const n = (k: string) =>
    typeof u[k] === 'number' && Number.isFinite(u[k]) && (u[k] as number) >= 0 ? (u[k] as number) : null;
  const total = n('total_tokens') ?? n('totalTokens');
  if (total !== null) return Math.round(total);
  const parts = [
    n('input_tokens') ?? n('prompt_tokens') ?? n('inputTokens'),
    n('output_tokens') ?? n('completion_tokens') ?? n('outputTokens'),
  ];
  return parts.some((p) => p !== null) ? Math.round(parts.reduce<number>((a, p) => a + (p ?? 0), 0)) : null;
}
