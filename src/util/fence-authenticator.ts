import { Logger } from '@nestjs/common';
import type { KeyObject } from 'node:crypto';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { UnauthenticatedFenceError } from '../errors/unauthenticated-fence.error';
import {
  commandKeyHash,
  FenceSecret,
  fenceKeyProblem,
  fenceMacMatches,
  fenceSecretKey,
} from './fence-signature';
import { FenceSignature, FenceToken, requireFenceToken } from './fence-token';

/** A worker's and a target's clocks may differ this much by default. */
export const DEFAULT_FENCE_CLOCK_SKEW_MS = 10_000;
/** The longest a token lives by default: the default `worker.leaseTtlMs`. */
export const DEFAULT_FENCE_TOKEN_LIFETIME_MS = 30_000;

const warned = new Set<string>();

/**
 * Logs once per process and `who` that fencing tokens are not authenticated there (a verifier without
 * keys, a guard without a verifier). @internal
 */
export function warnUnsignedFences(who: string, why = 'has no keys'): void {
  if (warned.has(who)) return;
  warned.add(who);
  new Logger('DurableExecution').warn(
    `${who} ${why}: fencing tokens are NOT authenticated. Anyone who reaches this target can send any ` +
      "token: raise a run's fence (its real worker is then refused 409) or pass as a run. Give " +
      'FenceVerifier({ keys: { <keyId>: <secret> } }) the secret every worker signs with (module option ' +
      'fence: { keyId, secret }), and authenticate callers first (docs/OPERATIONS.md, "Fencing tokens").',
  );
}

/** Whole milliseconds of at least `min`, or InvalidArgumentError naming the option. */
function millis(name: string, value: unknown, fallback: number, min: number): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min)
    throw new InvalidArgumentError(
      `FenceVerifier ${name}`,
      `must be whole milliseconds of at least ${min}, got ${String(value)}`,
    );
  return value;
}

/** The keys by id, checked and turned into KeyObjects. */
function keysOf(keys: unknown): ReadonlyMap<string, KeyObject> {
  if (keys === undefined || keys === null) return new Map();
  if (typeof keys !== 'object' || Array.isArray(keys))
    throw new InvalidArgumentError('FenceVerifier keys', 'must be an object { [keyId]: secret }');
  const map = new Map<string, KeyObject>();
  for (const [id, secret] of Object.entries(keys)) {
    const bad = fenceKeyProblem(id, secret);
    if (bad)
      throw new InvalidArgumentError(
        bad.field === 'keyId' ? 'FenceVerifier keys' : `FenceVerifier keys[${JSON.stringify(id)}]`,
        bad.field === 'keyId'
          ? `has a key id that is not 1-64 letters, digits, _, - or .: ${JSON.stringify(id)}`
          : bad.problem,
      );
    map.set(id, fenceSecretKey(secret as FenceSecret));
  }
  if (!map.size)
    throw new InvalidArgumentError(
      'FenceVerifier keys',
      'must list at least one key (leave it out for unsigned tokens)',
    );
  return map;
}

/**
 * What `FenceVerifier` and `DurableFenceGuard` check of a token before any table: format, and with keys
 * its key id, MAC, expiry and command. @internal
 */
export class FenceAuthenticator {
  readonly clockSkewMs: number;
  readonly maxTokenLifetimeMs: number;
  private readonly keys: ReadonlyMap<string, KeyObject>;

  constructor(options: {
    keys?: Record<string, FenceSecret>;
    clockSkewMs?: number;
    maxTokenLifetimeMs?: number;
  }) {
    this.keys = keysOf(options.keys);
    this.clockSkewMs = millis('clockSkewMs', options.clockSkewMs, DEFAULT_FENCE_CLOCK_SKEW_MS, 0);
    this.maxTokenLifetimeMs = millis(
      'maxTokenLifetimeMs',
      options.maxTokenLifetimeMs,
      DEFAULT_FENCE_TOKEN_LIFETIME_MS,
      1,
    );
    if (!this.keys.size) warnUnsignedFences('FenceVerifier');
  }

  get signed(): boolean {
    return this.keys.size > 0;
  }

  authenticate(token: FenceToken, options: { commandKey?: string }): FenceToken {
    const t = requireFenceToken(token, 'token');
    const commandKey = options.commandKey;
    if (commandKey !== undefined && (typeof commandKey !== 'string' || !commandKey))
      throw new InvalidArgumentError('commandKey', 'must be a non-empty string (the idempotency key served)');
    if (!this.keys.size) return t;
    const refuse = (reason: UnauthenticatedFenceError['reason'], detail: string) =>
      new UnauthenticatedFenceError(reason, t.runId, detail);
    const s: FenceSignature | undefined = t.signature;
    if (!s)
      throw refuse('unsigned', 'it is not signed (a v1 token) and this target accepts signed tokens only');
    const key = this.keys.get(s.keyId);
    if (!key)
      throw refuse('unknown-key', `it is signed with key id "${s.keyId}", which this target does not list`);
    if (!fenceMacMatches(key, { ...t, signature: s }))
      throw refuse('forged', `its MAC does not match key "${s.keyId}"`);
    const now = Date.now();
    if (now > s.expiresAtMs + this.clockSkewMs)
      throw refuse(
        'expired',
        `it expired at ${new Date(s.expiresAtMs).toISOString()} by the worker's clock, ${now - s.expiresAtMs} ms ` +
          `ago, more than clockSkewMs (${this.clockSkewMs})`,
      );
    if (s.expiresAtMs - now > this.maxTokenLifetimeMs + this.clockSkewMs)
      throw refuse(
        'lifetime',
        `it expires ${s.expiresAtMs - now} ms from now, more than maxTokenLifetimeMs (${this.maxTokenLifetimeMs}) ` +
          `+ clockSkewMs (${this.clockSkewMs})`,
      );
    if (commandKey !== undefined && commandKeyHash(commandKey) !== s.commandKeyHash)
      throw refuse('other-command', 'it was signed for another command than the one this request serves');
    return t;
  }
}
