import { createHmac, createSecretKey } from 'node:crypto';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import {
  commandKeyHash,
  fenceKeyProblem,
  fenceMacMatches,
  fenceSecretKey,
  signFence,
} from './fence-signature';
import { formatFence, parseFence } from './fence-token';

const SECRET = 's'.repeat(32);
const pair = { runId: 'run-1', timeline: 1, epoch: 3 };
const opts = {
  keyId: 'k1',
  secret: SECRET,
  commandKey: 'run_run-1:step_2:transfer',
  expiresAt: 1_765_000_000_000,
};

/** Issue 46 part 1: a token carries a MAC over run, command key, epoch, timeline and expiry. */
describe('signFence', () => {
  it('signs HMAC-SHA-256 over the version, key id, run, timeline, epoch, expiry and key hash', () => {
    const t = signFence(pair, opts);
    expect(t.signature.commandKeyHash).toMatch(/^[\w-]{43}$/);
    expect(t.signature.commandKeyHash).toBe(commandKeyHash(opts.commandKey));
    const fields = ['durable-fence.v2', 'k1', 'run-1', 1, 3, opts.expiresAt, t.signature.commandKeyHash];
    expect(t.signature.mac).toBe(createHmac('sha256', SECRET).update(fields.join('\n')).digest('base64url'));
    expect(t).toEqual({
      ...pair,
      signature: expect.objectContaining({ keyId: 'k1', expiresAtMs: opts.expiresAt }),
    });
    expect(signFence(pair, { ...opts, expiresAt: new Date(opts.expiresAt) })).toEqual(t);
  });

  it('round-trips through the v2 header, and the MAC matches its own key only', () => {
    const t = signFence(pair, opts);
    const header = formatFence(t);
    expect(header).toMatch(
      /^v2;kid=k1;run=run-1;timeline=1;epoch=3;exp=1765000000000;key=[\w-]{43};mac=[\w-]{43}$/,
    );
    const back = parseFence(header);
    expect(back).toEqual(t);
    expect(fenceMacMatches(fenceSecretKey(SECRET), back as typeof t)).toBe(true);
    expect(fenceMacMatches(fenceSecretKey('t'.repeat(32)), back as typeof t)).toBe(false);
    expect(fenceMacMatches(createSecretKey(Buffer.from(SECRET)), back as typeof t)).toBe(true);
  });

  it.each<[string, (t: ReturnType<typeof signFence>) => ReturnType<typeof signFence>]>([
    ['the run', (t) => ({ ...t, runId: 'run-2' })],
    ['the timeline', (t) => ({ ...t, timeline: 2 })],
    ['the epoch', (t) => ({ ...t, epoch: 1000 })],
    [
      'the expiry',
      (t) => ({ ...t, signature: { ...t.signature, expiresAtMs: t.signature.expiresAtMs + 1 } }),
    ],
    ['the key id', (t) => ({ ...t, signature: { ...t.signature, keyId: 'k2' } })],
    [
      'the command',
      (t) => ({ ...t, signature: { ...t.signature, commandKeyHash: commandKeyHash('other') } }),
    ],
  ])('a change of %s after signing breaks the MAC', (_what, change) => {
    expect(fenceMacMatches(fenceSecretKey(SECRET), change(signFence(pair, opts)))).toBe(false);
  });

  it.each<[string, object, RegExp]>([
    ['a short secret', { secret: 'x'.repeat(31) }, /options\.secret must have at least 32 bytes.*got 31/],
    ['no secret', { secret: undefined }, /options\.secret must be a string or a Buffer, got undefined/],
    ['a key id with a ;', { keyId: 'k;1' }, /options\.keyId must be 1-64 letters/],
    ['an empty command key', { commandKey: '' }, /options\.commandKey must be a non-empty string/],
    ['a fractional expiry', { expiresAt: 1.5 }, /options\.expiresAt must be a Date or whole milliseconds/],
  ])('refuses %s, naming the option and never the secret', (_what, change, re) => {
    const err = (() => {
      try {
        signFence(pair, { ...opts, ...change } as typeof opts);
      } catch (e) {
        return e as Error;
      }
    })();
    expect(err).toBeInstanceOf(InvalidArgumentError);
    expect(err!.message).toMatch(re);
    expect(err!.message).not.toContain('xxxxxxxx');
  });

  it('counts a secret in bytes (a Buffer or UTF-8), and takes a KeyObject', () => {
    expect(fenceKeyProblem('k', Buffer.alloc(32))).toBeUndefined();
    expect(fenceKeyProblem('k', 'é'.repeat(16))).toBeUndefined(); // 32 bytes in UTF-8
    expect(fenceKeyProblem('k', createSecretKey(Buffer.alloc(16)))?.problem).toMatch(/got 16/);
    expect(fenceKeyProblem('k'.repeat(65), SECRET)?.field).toBe('keyId');
  });
});
