import type { ModelBudgetOptions, ResolvedModelBudget } from '../interfaces/budget.interface';

/** A budget name as steps give it and the database stores it. */
const BUDGET_NAME = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/;
const KEYS = ['requests', 'tokens', 'periodMs', 'estimateTokens'];

const positiveInt = (v: unknown, max: number) =>
  Number.isInteger(v) && (v as number) >= 1 && (v as number) <= max;

/**
 * Checks `budgets` of the module's options and fills in the defaults; every problem is pushed to
 * `problems` as `budgets.<name>.<field>: <why>`. @internal
 */
export function resolveBudgets(raw: unknown, problems: string[]): Record<string, ResolvedModelBudget> {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    problems.push('budgets: must be an object of budgets by name, e.g. { openai: { requests: 500 } }');
    return {};
  }
  const out: Record<string, ResolvedModelBudget> = {};
  for (const [name, b] of Object.entries(raw as Record<string, ModelBudgetOptions>)) {
    const at = `budgets.${name}`;
    if (!BUDGET_NAME.test(name))
      problems.push(
        `${at}: a budget name is 1-100 letters, digits and . _ : - (starting with a letter or digit)`,
      );
    if (!b || typeof b !== 'object' || Array.isArray(b)) {
      problems.push(`${at}: must be an object { requests?, tokens?, periodMs?, estimateTokens? }`);
      continue;
    }
    for (const k of Object.keys(b))
      if (!KEYS.includes(k)) problems.push(`${at}.${k}: is not a budget option (${KEYS.join(', ')})`);
    const { requests, tokens, periodMs = 60_000, estimateTokens = 0 } = b;
    if (requests === undefined && tokens === undefined) problems.push(`${at}: give requests, tokens or both`);
    if (requests !== undefined && !positiveInt(requests, 1_000_000))
      problems.push(`${at}.requests: must be an integer from 1 to 1,000,000; got ${String(requests)}`);
    if (tokens !== undefined && !positiveInt(tokens, 1e12))
      problems.push(`${at}.tokens: must be an integer from 1 to 10^12; got ${String(tokens)}`);
    if (!positiveInt(periodMs, 86_400_000))
      problems.push(
        `${at}.periodMs: must be an integer from 1 to 86,400,000 (a day); got ${String(periodMs)}`,
      );
    if (!(Number.isInteger(estimateTokens) && estimateTokens >= 0 && estimateTokens <= 1e12))
      problems.push(`${at}.estimateTokens: must be an integer >= 0; got ${String(estimateTokens)}`);
    out[name] = { requests: requests ?? null, tokens: tokens ?? null, periodMs, estimateTokens };
  }
  return out;
}
