/**
 * `nestjs-durable-execution/fence`: fencing tokens. The caller's side sends its claim's token to a target
 * you own (`fenceHeaders(ctx.fence)`, signed with the module option `fence`); the target's side parses
 * it (`parseFence`, `DurableFenceGuard`, `@DurableFenceToken()`), authenticates it and refuses a
 * superseded claim in its own PostgreSQL (`FenceVerifier`). See docs/OPERATIONS.md ("Fencing tokens:
 * what they prove, keys and rotation, the fence table").
 *
 * This entry loads neither the package root nor a database driver (no typeorm, no pg): a target service
 * imports it alone. It also exports the errors its functions throw and `DurableExceptionFilter`, which
 * answers them 400, 401 and 409.
 * @packageDocumentation
 */
export {
  compareFences,
  DURABLE_FENCE_HEADER,
  fenceHeaders,
  formatFence,
  parseFence,
} from '../util/fence-token';
export type { FenceSignature, FenceToken } from '../util/fence-token';
export { signFence, type FenceSecret, type SignFenceOptions } from '../util/fence-signature';
export { FenceVerifier } from '../util/fence-verifier';
export type {
  FenceCheckOptions,
  FenceQuery,
  FenceSweepOptions,
  FenceVerifierOptions,
} from '../util/fence-verifier';
export { DurableFenceGuard, DurableFenceKey, DurableFenceToken } from '../nest/durable-fence.guard';
export { StaleFenceError } from '../errors/stale-fence.error';
export { UnauthenticatedFenceError, type FenceRefusal } from '../errors/unauthenticated-fence.error';
// Also exported by the package root (the same classes): what a target catches or answers with.
export { DurableExecutionError } from '../errors/durable-execution.error';
export { InvalidArgumentError } from '../errors/invalid-argument.error';
export { DurableExceptionFilter } from '../nest/durable-exception.filter';
