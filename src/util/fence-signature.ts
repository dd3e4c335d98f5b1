import { createHash, createHmac, createSecretKey, KeyObject, timingSafeEqual } from 'node:crypto';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { FENCE_KEY_ID, FenceSignature, FenceToken, requireFenceToken } from './fence-token';

/** A secret shared by the workers and a target: at least 32 bytes (`openssl rand -base64 32`). */
export type FenceSecret = string | Uint8Array;

/** The fewest bytes a secret may have: HMAC-SHA-256's own key size. */
export const MIN_FENCE_SECRET_BYTES = 32;

/**
 * Which of (`keyId`, `secret`) cannot sign or check tokens and why, or undefined. Never quotes the
 * secret. @internal
 */
export function fenceKeyProblem(
  keyId: unknown,
  secret: unknown,
): { field: 'keyId' | 'secret'; problem: string } | undefined {
  if (typeof keyId !== 'string' || !FENCE_KEY_ID.test(keyId))
    return {
      field: 'keyId',
      problem: `must be 1-64 letters, digits, _, - or ., got ${JSON.stringify(keyId) ?? String(keyId)}`,
    };
  const bytes =
    typeof secret === 'string'
      ? Buffer.byteLength(secret)
      : secret instanceof Uint8Array
        ? secret.byteLength
        : secret instanceof KeyObject && secret.type === 'secret'
          ? secret.symmetricKeySize!
          : -1;
  if (bytes < 0)
    return {
      field: 'secret',
      problem: `must be a string or a Buffer, got ${secret === null ? 'null' : typeof secret}`,
    };
  if (bytes < MIN_FENCE_SECRET_BYTES)
    return {
      field: 'secret',
      problem: `must have at least ${MIN_FENCE_SECRET_BYTES} bytes (openssl rand -base64 32), got ${bytes}`,
    };
  return undefined;
}

/**
 * The secret as a KeyObject: what signs and checks, and what a log line shows as `SecretKeyObject`
 * rather than the bytes. @internal
 */
export function fenceSecretKey(secret: FenceSecret | KeyObject): KeyObject {
  if (secret instanceof KeyObject) return secret;
  return createSecretKey(typeof secret === 'string' ? Buffer.from(secret, 'utf8') : Buffer.from(secret));
}

/** SHA-256 of a command's idempotency key, base64url: what a signed token names its command by. */
export function commandKeyHash(commandKey: string): string {
  return createHash('sha256').update(commandKey, 'utf8').digest('base64url');
}

/** The MAC of a token's fields under `key`: every field on its own line (none may hold a newline). @internal */
export function fenceMac(
  key: KeyObject,
  t: Pick<FenceToken, 'runId' | 'timeline' | 'epoch'>,
  s: Omit<FenceSignature, 'mac'>,
): string {
  const fields = ['durable-fence.v2', s.keyId, t.runId, t.timeline, t.epoch, s.expiresAtMs, s.commandKeyHash];
  return createHmac('sha256', key).update(fields.join('\n'), 'utf8').digest('base64url');
}

/** Whether `mac` is the token's MAC under `key`, compared in constant time. @internal */
export function fenceMacMatches(key: KeyObject, token: FenceToken & { signature: FenceSignature }): boolean {
  const want = Buffer.from(fenceMac(key, token, token.signature), 'base64url');
  const got = Buffer.from(token.signature.mac, 'base64url');
  return got.length === want.length && timingSafeEqual(got, want);
}

/** Options of `signFence`. */
export interface SignFenceOptions {
  /** The key id the target lists the secret under (`FenceVerifier`'s `keys`). */
  keyId: string;
  /** The shared secret, at least 32 bytes. */
  secret: FenceSecret;
  /** The idempotency key of the command the token is for. */
  commandKey: string;
  /** When the token expires (the claim's lease end, for the engine's tokens). */
  expiresAt: Date | number;
}

/**
 * A copy of `token` signed as a worker signs its commands' tokens (module option `fence`): HMAC-SHA-256
 * under `secret` over run, timeline, epoch, command key and expiry. The engine signs `ctx.fence` itself;
 * this is for a target's own tests and for callers that are not durable runs but hold the secret.
 * Throws InvalidArgumentError for a token the header cannot carry or a key that cannot sign.
 * @example
 * ```ts
 * const token = signFence({ runId, timeline: 1, epoch: 3 }, { keyId: 'k1', secret, commandKey: key, expiresAt: Date.now() + 30_000 });
 * await fetch(url, { headers: fenceHeaders(token) });
 * ```
 */
export function signFence(
  token: FenceToken,
  options: SignFenceOptions,
): FenceToken & { signature: FenceSignature } {
  const { runId, timeline, epoch } = requireFenceToken(token, 'token');
  const { keyId, secret, commandKey, expiresAt } = options ?? ({} as SignFenceOptions);
  const bad = fenceKeyProblem(keyId, secret);
  if (bad) throw new InvalidArgumentError(`signFence options.${bad.field}`, bad.problem);
  if (typeof commandKey !== 'string' || !commandKey)
    throw new InvalidArgumentError('signFence options.commandKey', 'must be a non-empty string');
  const expiresAtMs = expiresAt instanceof Date ? expiresAt.getTime() : expiresAt;
  if (!Number.isSafeInteger(expiresAtMs) || expiresAtMs < 0)
    throw new InvalidArgumentError(
      'signFence options.expiresAt',
      'must be a Date or whole milliseconds since 1970',
    );
  const pair = { runId, timeline, epoch };
  return { ...pair, signature: fenceSignature(fenceSecretKey(secret), keyId, pair, commandKey, expiresAtMs) };
}

/** The signature of a valid pair, by a valid key: what the engine puts on `ctx.fence`. @internal */
export function fenceSignature(
  key: KeyObject,
  keyId: string,
  pair: Pick<FenceToken, 'runId' | 'timeline' | 'epoch'>,
  commandKey: string,
  expiresAtMs: number,
): FenceSignature {
  const unsigned = { keyId, expiresAtMs, commandKeyHash: commandKeyHash(commandKey) };
  return { ...unsigned, mac: fenceMac(key, pair, unsigned) };
}
