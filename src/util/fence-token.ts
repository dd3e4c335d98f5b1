import { InvalidArgumentError } from '../errors/invalid-argument.error';

/**
 * The HTTP header that carries a command's fencing token, when the user sends it (`fenceHeaders`). The
 * engine never sends it on its own: run ids are internal and must not reach third parties.
 */
export const DURABLE_FENCE_HEADER = 'durable-fence';

/**
 * What a signed token adds (header `v2`): who signed it, until when it holds, for which command, and the
 * MAC over all of it. A worker signs with the module's `fence: { keyId, secret }`; a `FenceVerifier`
 * given the same secret under that key id checks it (`signFence` signs one by hand, for a target's tests).
 */
export interface FenceSignature {
  /** The id of the key that signed it (1-64 letters, digits, `_`, `-` or `.`): how a rotation tells keys apart. */
  keyId: string;
  /** When the token expires, in milliseconds since the Unix epoch by the signing worker's clock: its claim's lease end. */
  expiresAtMs: number;
  /** SHA-256 of the command's idempotency key (base64url): the token is valid with that command only. */
  commandKeyHash: string;
  /** HMAC-SHA-256 under the key over the version, key id, run, timeline, epoch, expiry and key hash (base64url). */
  mac: string;
}

/**
 * A claim's fencing token as a target sees it: the run and the claim's `(timeline, epoch)` pair, and its
 * `signature` when the workers sign tokens. Of two tokens of one run, the one with the greater pair
 * comes from the later claim (`compareFences`).
 */
export interface FenceToken {
  /** The run whose claim sends the request. */
  runId: string;
  /** The PostgreSQL WAL timeline of the claim (compared first). */
  timeline: number;
  /** The claim's epoch (compared second). */
  epoch: number;
  /** The MAC and what it covers besides the pair (header `v2`); absent from an unsigned token (`v1`). */
  signature?: FenceSignature;
}

/** Run ids in the header: the characters of a UUID and of a command's own key, at most 200. */
const RUN_ID = /^[A-Za-z0-9_.-]{1,200}$/;
/** Key ids: what a rotation names keys by. */
export const FENCE_KEY_ID = /^[A-Za-z0-9_.-]{1,64}$/;
/** A SHA-256 digest in base64url (no padding): the key hash and the MAC. */
const DIGEST = /^[A-Za-z0-9_-]{43}$/;
/** A non-negative decimal integer written without leading zeros (so that every token has one form). */
const DECIMAL = /^(0|[1-9][0-9]*)$/;
/** A timeline is a PostgreSQL `integer`; an epoch a `bigint` read into a JavaScript number. */
const MAX_TIMELINE = 2147483647;
const FORMAT = 'run=<run id>;timeline=<integer>;epoch=<integer>';
const FORMAT_V2 =
  'v2;kid=<key id>;run=<run id>;timeline=<integer>;epoch=<integer>;exp=<ms>;key=<hash>;mac=<mac>';
const FIELD = `${DURABLE_FENCE_HEADER} header`;

/** Why `fence` is not a token the header can carry, or undefined. */
function tokenProblem(fence: FenceToken): string | undefined {
  if (!fence || typeof fence !== 'object') return `must be a { runId, timeline, epoch } object`;
  if (typeof fence.runId !== 'string' || !RUN_ID.test(fence.runId))
    return `runId must be 1-200 letters, digits, _, - or ., got ${JSON.stringify(fence.runId)}`;
  if (!Number.isSafeInteger(fence.timeline) || fence.timeline < 0 || fence.timeline > MAX_TIMELINE)
    return `timeline must be an integer from 0 to ${MAX_TIMELINE}, got ${String(fence.timeline)}`;
  if (!Number.isSafeInteger(fence.epoch) || fence.epoch < 0)
    return `epoch must be a non-negative safe integer, got ${String(fence.epoch)}`;
  return fence.signature === undefined ? undefined : signatureProblem(fence.signature);
}

function signatureProblem(s: FenceSignature): string | undefined {
  if (!s || typeof s !== 'object')
    return `signature must be a { keyId, expiresAtMs, commandKeyHash, mac } object`;
  if (typeof s.keyId !== 'string' || !FENCE_KEY_ID.test(s.keyId))
    return `signature.keyId must be 1-64 letters, digits, _, - or ., got ${JSON.stringify(s.keyId)}`;
  if (!Number.isSafeInteger(s.expiresAtMs) || s.expiresAtMs < 0)
    return `signature.expiresAtMs must be a non-negative safe integer, got ${String(s.expiresAtMs)}`;
  for (const k of ['commandKeyHash', 'mac'] as const)
    if (typeof s[k] !== 'string' || !DIGEST.test(s[k]))
      return `signature.${k} must be 43 base64url characters`;
  return undefined;
}

/**
 * The header value of a fencing token: `run=<runId>;timeline=<timeline>;epoch=<epoch>` (v1) for an
 * unsigned token, `v2;kid=…;run=…;timeline=…;epoch=…;exp=…;key=…;mac=…` for a signed one. Extra fields
 * (a `CommandFence`'s `leaseExpiresAt`, `commandKey`) are left out. Throws InvalidArgumentError for a
 * token the header cannot carry.
 * @example `formatFence(ctx.fence)` → `'run=6f1c…;timeline=1;epoch=3'` (unsigned)
 */
export function formatFence(fence: FenceToken): string {
  const { runId, timeline, epoch, signature: s } = requireFenceToken(fence, 'fence');
  const pair = `run=${runId};timeline=${timeline};epoch=${epoch}`;
  if (!s) return pair;
  return `v2;kid=${s.keyId};${pair};exp=${s.expiresAtMs};key=${s.commandKeyHash};mac=${s.mac}`;
}

/**
 * The headers that send a command's fencing token (`{ 'durable-fence': formatFence(fence) }`), to spread
 * into a request's headers, call by call, for a target that checks it (`FenceVerifier`,
 * `DurableFenceGuard`). Send it only to targets you own: it names the run.
 * @example
 * ```ts
 * await fetch(url, { method: 'POST', headers: { ...fenceHeaders(ctx.fence), 'idempotency-key': ctx.idempotencyKey } });
 * ```
 */
export function fenceHeaders(fence: FenceToken): Record<string, string> {
  return { [DURABLE_FENCE_HEADER]: formatFence(fence) };
}

/**
 * Reads a `durable-fence` header value (as Node gives it: a string, an array, or undefined), v1
 * (unsigned) or v2 (signed; the signature is read, not checked: `FenceVerifier` checks it). Throws
 * InvalidArgumentError naming the header when it is missing, repeated, malformed, of an unknown
 * version, has a timeline or an epoch that is not a non-negative integer, or a run id that is not
 * 1-200 safe characters.
 */
export function parseFence(value: string | string[] | undefined): FenceToken {
  if (Array.isArray(value)) {
    if (value.length > 1) throw new InvalidArgumentError(FIELD, `is repeated (${value.length} values)`);
    value = value[0];
  }
  if (value === undefined || value === null) throw new InvalidArgumentError(FIELD, `is missing (${FORMAT})`);
  if (typeof value !== 'string')
    throw new InvalidArgumentError(FIELD, `must be a string, got ${typeof value}`);
  const text = value.trim();
  if (!text) throw new InvalidArgumentError(FIELD, `is missing (empty; ${FORMAT})`);
  // Node joins the values of a custom header sent twice with ", ".
  if (text.includes(',')) throw new InvalidArgumentError(FIELD, `is repeated (values joined by ",")`);
  const got = JSON.stringify(text.length > 240 ? `${text.slice(0, 240)}…` : text);
  if (text.startsWith('v2;')) return parseV2(text, got);
  const version = /^v([0-9]+);/.exec(text);
  if (version)
    throw new InvalidArgumentError(
      FIELD,
      `has version v${version[1]}, which this library does not read (v1: ${FORMAT}; v2: signed): update the library at the target`,
    );
  const m = /^run=([^;]*);timeline=([^;]*);epoch=([^;]*)$/.exec(text);
  if (!m) throw new InvalidArgumentError(FIELD, `is malformed: must be ${FORMAT}, got ${got}`);
  return pairOf(m[1], m[2], m[3], got);
}

/** A signed (v2) header value. */
function parseV2(text: string, got: string): FenceToken {
  const m =
    /^v2;kid=([^;]*);run=([^;]*);timeline=([^;]*);epoch=([^;]*);exp=([^;]*);key=([^;]*);mac=([^;]*)$/.exec(
      text,
    );
  if (!m) throw new InvalidArgumentError(FIELD, `is malformed: must be ${FORMAT_V2}, got ${got}`);
  const [, keyId, runId, timeline, epoch, exp, commandKeyHash, mac] = m;
  const token = pairOf(runId, timeline, epoch, got);
  if (!FENCE_KEY_ID.test(keyId))
    throw new InvalidArgumentError(
      FIELD,
      `has a key id that is not 1-64 letters, digits, _, - or ., got ${got}`,
    );
  if (!DIGEST.test(commandKeyHash) || !DIGEST.test(mac))
    throw new InvalidArgumentError(
      FIELD,
      `has a key hash or a mac that is not 43 base64url characters, got ${got}`,
    );
  return { ...token, signature: { keyId, expiresAtMs: integer('expiry', exp, got), commandKeyHash, mac } };
}

function pairOf(runId: string, timeline: string, epoch: string, got: string): FenceToken {
  if (!RUN_ID.test(runId))
    throw new InvalidArgumentError(
      FIELD,
      `has a run id that is not 1-200 letters, digits, _, - or ., got ${got}`,
    );
  const token = { runId, timeline: integer('timeline', timeline, got), epoch: integer('epoch', epoch, got) };
  if (token.timeline > MAX_TIMELINE)
    throw new InvalidArgumentError(FIELD, `has a timeline above ${MAX_TIMELINE}, got ${got}`);
  return token;
}

function integer(name: string, text: string, got: string): number {
  const n = Number(text);
  if (!DECIMAL.test(text) || !Number.isSafeInteger(n))
    throw new InvalidArgumentError(FIELD, `has a ${name} that is not a non-negative integer, got ${got}`);
  return n;
}

/**
 * Orders two tokens of one run by `(timeline, epoch)`, timeline first: -1 when `a` comes from an earlier
 * claim, 1 from a later one, 0 from the same claim (a retry). Throws InvalidArgumentError for tokens of
 * two runs, which have no order.
 */
export function compareFences(a: FenceToken, b: FenceToken): -1 | 0 | 1 {
  if (a.runId !== b.runId)
    throw new InvalidArgumentError(
      'fence',
      `compares tokens of one run only, got runs ${JSON.stringify(a.runId)} and ${JSON.stringify(b.runId)}`,
    );
  if (a.timeline !== b.timeline) return a.timeline < b.timeline ? -1 : 1;
  if (a.epoch !== b.epoch) return a.epoch < b.epoch ? -1 : 1;
  return 0;
}

/** The token's problem as InvalidArgumentError naming `field`, for a token built by hand. @internal */
export function requireFenceToken(fence: FenceToken, field: string): FenceToken {
  const problem = tokenProblem(fence);
  if (problem) throw new InvalidArgumentError(field, problem);
  const { runId, timeline, epoch, signature: s } = fence;
  if (!s) return { runId, timeline, epoch };
  const { keyId, expiresAtMs, commandKeyHash, mac } = s;
  return { runId, timeline, epoch, signature: { keyId, expiresAtMs, commandKeyHash, mac } };
}
