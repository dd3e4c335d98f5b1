import { fromJsonValue, toJsonValue, toOrderedJson } from './values';

describe('openai-agents values', () => {
  it('round-trips what JSON cannot hold, through the stored (JSON) form', () => {
    const value = {
      at: new Date('2026-01-02T03:04:05.000Z'),
      bytes: new Uint8Array([1, 2, 255]),
      list: [1, undefined, 'x'],
      error: Object.assign(new Error('boom'), { status: 500 }),
      $oa: 'a key that looks like the tag',
      drop: () => 1,
    };
    const back = fromJsonValue<Record<string, unknown>>(JSON.parse(JSON.stringify(toJsonValue(value))));
    expect(back.at).toEqual(value.at);
    expect(back.bytes).toEqual(value.bytes);
    expect(back.list).toEqual([1, undefined, 'x']);
    expect(back.error).toBeInstanceOf(Error);
    expect(back.error).toMatchObject({ message: 'boom', status: 500 });
    expect(back.$oa).toBe(value.$oa);
    expect('drop' in back).toBe(false);
  });

  it('keeps the key order of an object kept as JSON text, as jsonb would not', () => {
    const stored = toOrderedJson({ orderId: 'A-1', amountCents: 1250, status: 'delivered' });
    expect(stored).toEqual({ $oa: 'json', v: '{"orderId":"A-1","amountCents":1250,"status":"delivered"}' });
    expect(JSON.stringify(fromJsonValue(stored))).toBe(
      '{"orderId":"A-1","amountCents":1250,"status":"delivered"}',
    );
    expect(toOrderedJson('text')).toBe('text');
    expect(toOrderedJson(null)).toBe(null);
  });
});
