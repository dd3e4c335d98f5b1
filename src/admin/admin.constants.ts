/** Injection token of the admin module's resolved options. */
export const DURABLE_ADMIN_OPTIONS = Symbol('durable-execution:admin-options');
/** Metadata key on admin handlers that change a run (cancel, retry, approve, ...). */
export const DURABLE_ADMIN_ACTION = 'durable-execution:admin-action';
/** Request property where ApiKeyAdminGuard (or the app's guard) puts the operator's name. */
export const DURABLE_OPERATOR = 'durableOperator';
/**
 * The longest text each operator action takes, in characters: the admin API's body caps, and the CLI's
 * for the same flags (`--reason`, `--note`, `--error`).
 */
export const OPERATOR_TEXT_LIMITS = { reason: 500, note: 1000, error: 2000 } as const;
