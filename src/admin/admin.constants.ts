/** Injection token of the admin module's resolved options. */
export const DURABLE_ADMIN_OPTIONS = Symbol('durable-execution:admin-options');
/** Metadata key on admin handlers that change a run (cancel, retry, approve, ...). */
export const DURABLE_ADMIN_ACTION = 'durable-execution:admin-action';
/** Request property where ApiKeyAdminGuard (or the app's guard) puts the operator's name. */
export const DURABLE_OPERATOR = 'durableOperator';
