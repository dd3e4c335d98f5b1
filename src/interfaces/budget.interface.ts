/**
 * A budget of model calls shared by the whole fleet (`DurableExecutionModule.forRoot({ budgets })`),
 * drawn on by `@DurableStep({ budget: name })`: at most `requests` calls and `tokens` tokens in any
 * `periodMs` (a sliding window on the database clock). Give one or both.
 */
export interface ModelBudgetOptions {
  /** Calls (attempts, retries included) allowed in any window. */
  requests?: number;
  /** Tokens allowed in any window: each call is admitted on its estimate, then charged its real usage. */
  tokens?: number;
  /** The window. Default 60,000 (per minute, as providers state their limits). */
  periodMs?: number;
  /**
   * Tokens a call is admitted on before its usage is known. Default 0: a call goes when the window has
   * any token left, and its real usage is charged when it returns.
   */
  estimateTokens?: number;
}

/** A budget as the module resolved it. */
export interface ResolvedModelBudget {
  requests: number | null;
  tokens: number | null;
  periodMs: number;
  estimateTokens: number;
}
