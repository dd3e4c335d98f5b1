import { encodeValue } from '../util/codec';
import { errorFields, MAX_ERROR_FIELD_CHARS, MAX_ERROR_FIELDS, serializeError } from './serialize-error';
import { errorFromStored } from './stored-error';

const withFields = (fields: Record<string, unknown>) => Object.assign(new Error('boom'), fields);

describe('errorFields', () => {
  it('keeps primitive fields, drops objects, functions, symbols, bigints and non-finite numbers', () => {
    const err = withFields({
      status: 429,
      ok: false,
      note: null,
      kind: 'rate',
      nested: { a: 1 },
      list: [1],
      fn: () => 1,
      sym: Symbol('s'),
      big: 1n,
      inf: Infinity,
      nan: NaN,
      gone: undefined,
    });
    expect(errorFields(err)).toEqual({ status: 429, ok: false, note: null, kind: 'rate' });
  });

  it('drops keys that may hold credentials or a request, case-insensitively, keeping request ids', () => {
    const err = withFields({
      Authorization: 'Bearer s',
      headers: 'h',
      configName: 'c',
      request: 'r',
      responseBody: 'b',
      setCookie: 'c',
      dbPassword: 'p',
      clientSecret: 's',
      accessToken: 't',
      apiKey: 'k',
      API_KEY: 'k',
      credentials: 'c',
      url: 'https://x/?key=k',
      baseURL: 'https://x',
      during: 'kept',
      requestId: 'req_1',
      request_id: 'req_2',
      status: 1,
    });
    expect(errorFields(err)).toEqual({ during: 'kept', requestId: 'req_1', request_id: 'req_2', status: 1 });
  });

  it('caps the count and string length, and leaves the stored parts to their own keys', () => {
    const many: Record<string, unknown> = { code: 'E_STR', retryable: true, long: 'y'.repeat(5000) };
    for (let i = 0; i < 40; i++) many[`f${i}`] = i;
    const fields = errorFields(withFields(many))!;
    expect(Object.keys(fields)).toHaveLength(MAX_ERROR_FIELDS);
    expect(fields.long).toHaveLength(MAX_ERROR_FIELD_CHARS);
    expect(fields).not.toHaveProperty('code');
    expect(fields).not.toHaveProperty('retryable');
    expect(errorFields(withFields({ code: 7 }))).toEqual({ code: 7 }); // a numeric code is a field
  });

  it('skips a getter that throws, and is undefined when nothing is left', () => {
    const err = new Error('boom');
    Object.defineProperty(err, 'bad', {
      enumerable: true,
      get() {
        throw new Error('no');
      },
    });
    expect(errorFields(err)).toBeUndefined();
  });
});

describe('serializeError with fields, errorFromStored', () => {
  it('stores fields only when asked, and the rebuilt error has them as own properties', () => {
    const err = withFields({ status: 429, retryAfterMs: 1500, config: { headers: { a: 1 } } });
    expect(serializeError(err)).not.toHaveProperty('fields');
    const stored = encodeValue(serializeError(err, { fields: true }), 'error', Number.MAX_SAFE_INTEGER);
    expect((stored.value as { fields: unknown }).fields).toEqual({ status: 429, retryAfterMs: 1500 });
    const back = errorFromStored(stored.value) as Error & Record<string, unknown>;
    expect(back.status).toBe(429);
    expect(back.retryAfterMs).toBe(1500);
    expect(back.message).toBe('boom');
    expect(back).not.toHaveProperty('config');
  });

  it('keeps fields of the cause chain too', () => {
    const err = new Error('outer', { cause: withFields({ status: 503 }) });
    const back = errorFromStored(serializeError(err, { fields: true }));
    expect((back.cause as { status?: number }).status).toBe(503);
  });

  it('never lets a stored field override the stored name or touch the prototype', () => {
    const stored = JSON.parse(
      '{"name":"X","message":"m","fields":{"name":"Y","message":"n","__proto__":{"polluted":1},"status":1}}',
    );
    const back = errorFromStored(stored) as Error & Record<string, unknown>;
    expect(back.name).toBe('X');
    expect(back.message).toBe('m');
    expect(back.status).toBe(1);
    expect(back).toBeInstanceOf(Error);
    expect(back.polluted).toBeUndefined();
  });
});
