import { PayloadTooLargeError, SerializationError } from '../errors';
import { MAX_JSON_DEPTH, storableJson } from './json';
import { toStoredJson } from './codec';

describe('toStoredJson', () => {
  const store = (v: unknown, max = 1000) => toStoredJson(v, 'input of run kind "po"', max);

  it('serialises plain JSON unchanged', () => {
    const v = { a: [1, 'x', true, null, { b: 2.5 }], d: new Date(0) };
    expect(JSON.parse(store(v))).toEqual({
      a: [1, 'x', true, null, { b: 2.5 }],
      d: '1970-01-01T00:00:00.000Z',
    });
  });

  it.each([
    ['top-level undefined', undefined, '$ is undefined'],
    ['BigInt', { n: 10n }, '$.n is a BigInt'],
    ['function', { items: [{ f: () => 1 }] }, '$.items[0].f is a function'],
    ['NaN', { x: NaN }, '$.x is NaN'],
    ['Map', { m: new Map() }, '$.m is a Map'],
  ])('rejects %s naming the path', (_label, value, expected) => {
    expect(() => store(value)).toThrow(SerializationError);
    expect(() => store(value)).toThrow(expected);
  });

  it('rejects circular structures', () => {
    const a: Record<string, unknown> = { x: 1 };
    a.self = { back: a };
    expect(() => store(a)).toThrow('$.self.back is a circular reference');
  });

  it('allows the same object twice when it is not a cycle', () => {
    const shared = { k: 1 };
    expect(JSON.parse(store({ a: shared, b: shared }))).toEqual({ a: { k: 1 }, b: { k: 1 } });
  });

  it('enforces the byte cap with a typed error', () => {
    expect(() => store({ s: 'é'.repeat(600) }, 1000)).toThrow(PayloadTooLargeError);
    expect(store({ s: 'a'.repeat(900) }, 1000)).toHaveLength(908);
  });

  it('stops walking a value as soon as it is surely past the cap (a wide body is not walked whole first)', () => {
    let walkedOn = false;
    const wide = { big: 'x'.repeat(2000), later: { toJSON: () => ((walkedOn = true), 1) } };
    expect(() => store(wide, 1000)).toThrow(PayloadTooLargeError);
    expect(walkedOn).toBe(false);
    // Never a false refusal: right at the cap, fields JSON drops, and multi-byte text are counted low.
    const exact = { s: 'a'.repeat(992) }; // {"s":"…"} = 992 + 8 bytes
    expect(store(exact, 1000)).toHaveLength(1000);
    expect(store({ s: 'a'.repeat(990), gone: undefined }, 1000)).toHaveLength(998);
    expect(() => store({ s: 'a'.repeat(993) }, 1000)).toThrow(PayloadTooLargeError);
  });
});

describe('what jsonb refuses', () => {
  const store = (v: unknown) => toStoredJson(v, 'output of step "s"', 1_000_000);

  it.each([
    ['a NUL in a value', { a: 'x\u0000y' }, '$.a contains a NUL'],
    ['a lone high surrogate', { a: ['ok', 'x\uD800'] }, '$.a[1] contains a lone UTF-16 surrogate'],
    ['a lone low surrogate', 'x\uDC00', '$ contains a lone UTF-16 surrogate'],
    ['a NUL in a key', { ['k\u0000']: 1 }, 'has a key that contains a NUL'],
  ])('rejects %s naming the path', (_label, value, expected) => {
    expect(() => store(value)).toThrow(SerializationError);
    expect(() => store(value)).toThrow(expected);
  });

  it('accepts a valid surrogate pair', () => {
    expect(JSON.parse(store({ e: '\uD83D\uDE00' }))).toEqual({ e: '😀' });
  });

  it('rejects nesting deeper than MAX_JSON_DEPTH without overflowing the stack', () => {
    let deep: unknown = null;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(() => store(deep)).toThrow(`nested deeper than ${MAX_JSON_DEPTH} levels`);
  });

  it('storableJson makes anything storable', () => {
    const out = storableJson({ a: 'x\u0000\uD800', n: NaN, f: () => 1, ['k\u0000']: [1n] });
    expect(out).toEqual({ a: 'x\uFFFD\uFFFD', n: null, ['k\uFFFD']: ['1'] });
    expect(() => store(out)).not.toThrow();
  });
});
