import { commandsByName } from './tools';
import { valueCodec } from './values';

describe('agent-shared value codec', () => {
  const codec = valueCodec({ tag: '$t', errorFields: ['status'], urls: true });

  it('escapes an object that has the tag key, at any depth, and rebuilds it as it was', () => {
    const value = { $t: 'date', v: 'not a date', nested: [{ $t: 'bytes', v: 'AQI=' }, { $t: 'x' }] };
    const stored = JSON.parse(JSON.stringify(codec.toJson(value)));
    expect(stored).toMatchObject({ $t: 'escaped' });
    expect(codec.fromJson(stored)).toEqual(value);
  });

  it('keeps what JSON cannot hold, after a JSON round trip too', () => {
    const value = {
      at: new Date('2026-01-02T03:04:05.000Z'),
      bad: new Date(NaN),
      bytes: new Uint8Array([1, 2, 255]),
      url: new URL('https://example.com/a?b=1'),
      list: [1, undefined, 'x'],
      error: Object.assign(new Error('boom'), { status: 500, other: 1 }),
      big: 10n,
      fn: () => 1,
    };
    const back = codec.fromJson<Record<string, any>>(JSON.parse(JSON.stringify(codec.toJson(value))));
    expect(back.at).toEqual(value.at);
    expect(Number.isNaN(back.bad.getTime())).toBe(true);
    expect(back.bytes).toEqual(value.bytes);
    expect(back.url).toEqual(value.url);
    expect(back.list).toEqual([1, undefined, 'x']);
    expect(back.error).toBeInstanceOf(Error);
    expect(back.error).toMatchObject({ message: 'boom', name: 'Error', status: 500 });
    expect(back.error.other).toBeUndefined();
    expect(back.big).toBe('10');
    expect('fn' in back).toBe(false);
  });

  it('stores URLs as plain objects without `urls`, and drops cycles', () => {
    const plain = valueCodec({ tag: '$t', errorFields: [], urls: false });
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    expect(plain.toJson({ u: new URL('https://example.com') })).toEqual({ u: {} });
    expect(plain.toJson(cyclic)).toEqual({ a: 1 });
  });

  it('keeps an object as JSON text with toOrderedJson, and leaves other values as toJson does', () => {
    const stored = codec.toOrderedJson({ b: 1, a: new Date('2026-01-02T03:04:05.000Z') });
    expect(stored).toEqual({ $t: 'json', v: '{"b":1,"a":{"$t":"date","v":"2026-01-02T03:04:05.000Z"}}' });
    expect(codec.fromJson(stored)).toEqual({ b: 1, a: new Date('2026-01-02T03:04:05.000Z') });
    expect(codec.toOrderedJson('text')).toBe('text');
    expect(codec.toOrderedJson(undefined)).toBeUndefined();
  });
});

describe('commandsByName', () => {
  it('takes names alone or options per name, skipping undefined options', () => {
    expect(commandsByName(undefined)).toEqual({});
    expect(commandsByName(['a', 'b'])).toEqual({ a: {}, b: {} });
    expect(commandsByName({ a: { inDoubt: 'lookup' }, b: undefined })).toEqual({ a: { inDoubt: 'lookup' } });
  });
});
