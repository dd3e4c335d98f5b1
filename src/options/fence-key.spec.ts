import 'reflect-metadata';
import { KeyObject } from 'node:crypto';
import { failure, URL } from '../../test/helpers/options';
import { resolveOptions } from './resolve-options';

const SECRET = 'a-secret-of-at-least-32-bytes-long!';

/** Issue 46 part 1: the module option `fence`, the key the workers sign fencing tokens with. */
describe('resolveOptions: fence', () => {
  it('is off by default (unsigned tokens)', () => {
    expect(resolveOptions({ database: { url: URL } }).fence).toBeUndefined();
    expect(resolveOptions({ database: { url: URL }, fence: null as never }).fence).toBeUndefined();
  });

  it('keeps the key id and the secret as a KeyObject (a log line never shows the bytes)', () => {
    for (const secret of [SECRET, Buffer.from(SECRET)]) {
      const { fence } = resolveOptions({ database: { url: URL }, fence: { keyId: 'k1', secret } });
      expect(fence!.keyId).toBe('k1');
      expect(fence!.key).toBeInstanceOf(KeyObject);
      expect(fence!.key.export().toString()).toBe(SECRET);
      expect(JSON.stringify(fence)).not.toContain(SECRET);
    }
  });

  it.each<[string, unknown, string[]]>([
    ['not an object', 'k1:secret', ['fence: must be an object { keyId, secret }; got string']],
    [
      'no secret',
      { keyId: 'k1' },
      [expect.stringMatching(/^fence\.secret: is required with fence .*is the variable/)],
    ],
    [
      'a short secret',
      { keyId: 'k1', secret: 'short-secret' },
      [expect.stringMatching(/^fence\.secret: must have at least 32 bytes .*got 12$/)],
    ],
    [
      'no key id',
      { secret: SECRET },
      ['fence.keyId: must be 1-64 letters, digits, _, - or ., got undefined'],
    ],
    [
      'a misspelt field',
      { keyId: 'k1', secret: SECRET, keyID: 'k1' },
      ['fence.keyID: unknown option (misspelt?)'],
    ],
  ])('refuses %s, naming the field and never the secret', (_label, fence, problems) => {
    const err = failure({ database: { url: URL }, fence: fence as never });
    expect(err.problems).toEqual(problems);
    expect(err.message).not.toContain('short-secret');
    expect(err.message).not.toContain(SECRET);
  });
});
