/**
 * Fencing tokens, as the public API exports them: the header a command sends (`fenceHeaders`), signed
 * with the module option `fence`, and the verifier a target you own checks it with. No driver (its one
 * Nest import is the Logger of the unsigned-mode warning).
 */
export type { FenceKeyOptions } from '../options/fence-key';
export { compareFences, DURABLE_FENCE_HEADER, fenceHeaders, formatFence, parseFence } from './fence-token';
export type { FenceSignature, FenceToken } from './fence-token';
export { signFence, type FenceSecret, type SignFenceOptions } from './fence-signature';
export { FenceVerifier } from './fence-verifier';
export type {
  FenceCheckOptions,
  FenceQuery,
  FenceSweepOptions,
  FenceVerifierOptions,
} from './fence-verifier';
