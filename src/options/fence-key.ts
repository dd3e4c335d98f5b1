import type { KeyObject } from 'node:crypto';
import { FenceSecret, fenceKeyProblem, fenceSecretKey } from '../util/fence-signature';

/**
 * The key this process signs its commands' fencing tokens with (module option `fence`). A target's
 * `FenceVerifier` lists the same secret under the same key id (`keys`) and refuses tokens it cannot
 * authenticate. Rotate by listing the new key at every target first, then switching the workers.
 */
export interface FenceKeyOptions {
  /** The id the targets list this secret under: 1-64 letters, digits, `_`, `-` or `.` (`'k2'`, `'2026-12'`). */
  keyId: string;
  /** The shared secret: at least 32 bytes (`openssl rand -base64 32`). Read it from a secret store, not the source. */
  secret: FenceSecret;
}

/** The module option `fence` as the engine uses it: the key id and the secret as a KeyObject. */
export interface ResolvedFenceKey {
  keyId: string;
  /** The secret, as a KeyObject (a log line shows `SecretKeyObject`, never the bytes). */
  key: KeyObject;
}

/**
 * Checks the module option `fence` ({ keyId, secret }), adding what is wrong to `problems` (never the
 * secret); undefined when it is not given (tokens unsigned). @internal
 */
export function resolveFenceKey(raw: unknown, problems: string[]): ResolvedFenceKey | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    problems.push(
      `fence: must be an object { keyId, secret }; got ${Array.isArray(raw) ? 'an array' : typeof raw}`,
    );
    return undefined;
  }
  const { keyId, secret, ...rest } = raw as { keyId?: unknown; secret?: unknown };
  for (const k of Object.keys(rest)) problems.push(`fence.${k}: unknown option (misspelt?)`);
  const bad = fenceKeyProblem(keyId, secret);
  if (bad) {
    const missing = bad.field === 'secret' && (secret === undefined || secret === null);
    problems.push(
      missing
        ? 'fence.secret: is required with fence (the secret the targets check tokens with; is the variable holding it set?)'
        : `fence.${bad.field}: ${bad.problem}`,
    );
  }
  if (bad || Object.keys(rest).length) return undefined;
  return { keyId: keyId as string, key: fenceSecretKey(secret as FenceSecret) };
}
