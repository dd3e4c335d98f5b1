import fc from 'fast-check';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import {
  compareFences,
  DURABLE_FENCE_HEADER,
  fenceHeaders,
  FenceSignature,
  FenceToken,
  formatFence,
  parseFence,
} from './fence-token';

const RUN = '6f1c2e0a-3b4d-4c5e-8f60-718293a4b5c6';
const token = (timeline: number, epoch: number, runId = RUN): FenceToken => ({ runId, timeline, epoch });

const runIds = fc.stringMatching(/^[A-Za-z0-9_.-]{1,200}$/);
const tokens = fc.record({
  runId: runIds,
  timeline: fc.integer({ min: 0, max: 2147483647 }),
  epoch: fc.maxSafeInteger().filter((n) => n >= 0),
});

/** The InvalidArgumentError `fn` throws, checked to name the header. */
function headerError(fn: () => unknown): InvalidArgumentError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(InvalidArgumentError);
    const err = e as InvalidArgumentError;
    expect(err.code).toBe('DURABLE_INVALID_ARGUMENT');
    expect(err.field).toBe('durable-fence header');
    expect(err.message).toMatch(/^durable-fence header /);
    return err;
  }
  throw new Error('did not throw');
}

describe('formatFence / fenceHeaders', () => {
  it('writes run, timeline and epoch in one form, and nothing else of a CommandFence', () => {
    const fence = { ...token(2, 7), leaseExpiresAt: new Date() };
    expect(formatFence(fence)).toBe(`run=${RUN};timeline=2;epoch=7`);
    expect(fenceHeaders(fence)).toEqual({ 'durable-fence': `run=${RUN};timeline=2;epoch=7` });
    expect(DURABLE_FENCE_HEADER).toBe('durable-fence');
  });

  it.each<[string, FenceToken]>([
    ['a run id with a ;', token(1, 1, 'a;b')],
    ['an empty run id', token(1, 1, '')],
    ['a run id of 201 characters', token(1, 1, 'r'.repeat(201))],
    ['a negative epoch', token(1, -1)],
    ['a fractional timeline', token(1.5, 1)],
    ['an unsafe epoch', token(1, 2 ** 60)],
    ['a timeline above int4', token(2 ** 31, 1)],
  ])('refuses a token the header cannot carry: %s', (_label, bad) => {
    expect(() => formatFence(bad)).toThrow(InvalidArgumentError);
  });

  it('round-trips every token through parseFence (property)', () => {
    fc.assert(
      fc.property(tokens, (t) => {
        expect(parseFence(formatFence(t))).toEqual(t);
        expect(parseFence(fenceHeaders(t)[DURABLE_FENCE_HEADER])).toEqual(t);
        expect(parseFence([formatFence(t)])).toEqual(t);
      }),
      { numRuns: 500 },
    );
  });
});

describe('parseFence', () => {
  it('reads a header value, trimmed', () => {
    expect(parseFence(` run=${RUN};timeline=1;epoch=3 `)).toEqual(token(1, 3));
    expect(parseFence('run=r-1.x_y;timeline=0;epoch=0')).toEqual(token(0, 0, 'r-1.x_y'));
  });

  it.each<[string, string | string[] | undefined, RegExp]>([
    ['missing', undefined, /is missing/],
    ['empty', '', /is missing/],
    ['an empty array', [], /is missing/],
    ['repeated (two values)', ['run=a;timeline=1;epoch=1', 'run=a;timeline=1;epoch=2'], /is repeated/],
    ['repeated (joined by Node)', 'run=a;timeline=1;epoch=1, run=a;timeline=1;epoch=2', /is repeated/],
    ['in another order', 'timeline=1;run=a;epoch=1', /is malformed/],
    ['with a field missing', 'run=a;epoch=1', /is malformed/],
    ['with an extra field', 'run=a;timeline=1;epoch=1;lease=2', /is malformed/],
    ['a bare number', '3', /is malformed/],
    ['a negative epoch', 'run=a;timeline=1;epoch=-1', /epoch that is not a non-negative integer/],
    ['a fractional epoch', 'run=a;timeline=1;epoch=1.5', /epoch that is not a non-negative integer/],
    ['an exponent', 'run=a;timeline=1;epoch=1e3', /epoch that is not a non-negative integer/],
    ['a leading zero', 'run=a;timeline=01;epoch=1', /timeline that is not a non-negative integer/],
    ['an empty timeline', 'run=a;timeline=;epoch=1', /timeline that is not a non-negative integer/],
    ['an unsafe epoch', 'run=a;timeline=1;epoch=9007199254740993', /epoch that is not/],
    ['a timeline above int4', 'run=a;timeline=2147483648;epoch=1', /timeline above 2147483647/],
    ['an empty run id', 'run=;timeline=1;epoch=1', /run id that is not 1-200/],
    ['a run id with a space', 'run=a b;timeline=1;epoch=1', /run id that is not 1-200/],
    ['a run id of 201 characters', `run=${'r'.repeat(201)};timeline=1;epoch=1`, /run id that is not 1-200/],
  ])('refuses a header %s, naming the header and the reason', (_label, value, reason) => {
    expect(headerError(() => parseFence(value)).message).toMatch(reason);
  });

  it('never throws anything but InvalidArgumentError naming the header (property)', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: 'grapheme-ascii' })), (s) => {
        try {
          const t = parseFence(s);
          expect(formatFence(t)).toBe(s.trim()); // what parses is the one form, and only it
        } catch (e) {
          expect(e).toBeInstanceOf(InvalidArgumentError);
          expect((e as InvalidArgumentError).field).toBe('durable-fence header');
        }
      }),
      { numRuns: 500 },
    );
  });
});

describe('signed tokens (v2 header)', () => {
  const signature = (over: Partial<FenceSignature> = {}): FenceSignature => ({
    keyId: 'k1',
    expiresAtMs: 1765000000000,
    commandKeyHash: 'h'.repeat(43),
    mac: 'm'.repeat(43),
    ...over,
  });
  const v2 = `v2;kid=k1;run=${RUN};timeline=2;epoch=7;exp=1765000000000;key=${'h'.repeat(43)};mac=${'m'.repeat(43)}`;

  it('writes a signed token as v2 (key id, pair, expiry, key hash, MAC) and an unsigned one as v1', () => {
    const fence = { ...token(2, 7), leaseExpiresAt: new Date(), commandKey: 'k', signature: signature() };
    expect(formatFence(fence)).toBe(v2);
    expect(formatFence({ ...fence, signature: undefined })).toBe(`run=${RUN};timeline=2;epoch=7`);
    expect(parseFence(v2)).toEqual({ ...token(2, 7), signature: signature() });
  });

  it('round-trips every signed token (property)', () => {
    const signed = fc.record({
      runId: runIds,
      timeline: fc.integer({ min: 0, max: 2147483647 }),
      epoch: fc.maxSafeInteger().filter((n) => n >= 0),
      signature: fc.record({
        keyId: fc.stringMatching(/^[A-Za-z0-9_.-]{1,64}$/),
        expiresAtMs: fc.maxSafeInteger().filter((n) => n >= 0),
        commandKeyHash: fc.stringMatching(/^[A-Za-z0-9_-]{43}$/),
        mac: fc.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      }),
    });
    fc.assert(
      fc.property(signed, (t) => {
        expect(parseFence(formatFence(t))).toEqual(t);
        expect(formatFence(parseFence(formatFence(t)))).toBe(formatFence(t));
      }),
      { numRuns: 300 },
    );
  });

  it.each<[string, string, RegExp]>([
    ['a field missing', v2.replace(/;exp=[0-9]+/, ''), /is malformed: must be v2;kid=/],
    ['a short MAC', v2.slice(0, -1), /mac that is not 43 base64url/],
    ['a key id with a space', v2.replace('kid=k1', 'kid=k 1'), /key id that is not 1-64/],
    ['a negative expiry', v2.replace('exp=1765000000000', 'exp=-1'), /expiry that is not a non-negative/],
    ['a stale epoch', v2.replace('epoch=7', 'epoch=07'), /epoch that is not a non-negative/],
    ['an unknown version', v2.replace('v2;', 'v3;'), /version v3, which this library does not read/],
  ])('refuses a v2 header with %s, naming the header', (_label, value, reason) => {
    expect(headerError(() => parseFence(value)).message).toMatch(reason);
  });

  it('refuses a signature the header cannot carry', () => {
    for (const bad of [
      { keyId: 'a;b' },
      { expiresAtMs: -1 },
      { mac: 'short' },
      { commandKeyHash: 'x'.repeat(44) },
    ])
      expect(() => formatFence({ ...token(1, 1), signature: signature(bad) })).toThrow(
        /token|fence signature/,
      );
  });
});

describe('compareFences', () => {
  it('compares the timeline first, then the epoch', () => {
    expect(compareFences(token(1, 3), token(1, 4))).toBe(-1);
    expect(compareFences(token(1, 4), token(1, 3))).toBe(1);
    expect(compareFences(token(1, 4), token(1, 4))).toBe(0);
    // After a failover the epoch can repeat or even be lower: the higher timeline is the later claim.
    expect(compareFences(token(2, 1), token(1, 9))).toBe(1);
    expect(compareFences(token(1, 9), token(2, 1))).toBe(-1);
  });

  it('refuses tokens of two runs', () => {
    expect(() => compareFences(token(1, 1, 'a'), token(1, 1, 'b'))).toThrow(InvalidArgumentError);
  });

  it('is a total order on (timeline, epoch), antisymmetric (property)', () => {
    const pair = fc.tuple(fc.nat(5), fc.nat(5));
    fc.assert(
      fc.property(pair, pair, pair, ([t1, e1], [t2, e2], [t3, e3]) => {
        const [a, b, c] = [token(t1, e1), token(t2, e2), token(t3, e3)];
        expect(compareFences(a, b)).toBe(-compareFences(b, a) || 0);
        expect(compareFences(a, b) === 0).toBe(t1 === t2 && e1 === e2);
        expect(compareFences(a, b)).toBe(Math.sign(t1 - t2) || Math.sign(e1 - e2));
        if (compareFences(a, b) <= 0 && compareFences(b, c) <= 0)
          expect(compareFences(a, c)).toBeLessThanOrEqual(0);
      }),
    );
  });
});
