import { fromAiJson, toAiJson } from './ai-values';

describe('ai-sdk values', () => {
  it('rebuilds Dates, bytes, URLs and errors from their JSON form, after a JSON round trip too', () => {
    const value = {
      response: { id: 'r1', timestamp: new Date('2026-12-03T10:00:00.000Z'), modelId: 'm' },
      content: [{ type: 'file', mediaType: 'image/png', data: new Uint8Array([0, 1, 255]) }, undefined],
      source: new URL('https://example.com/a?b=1'),
      providerMetadata: { scripted: { cached: 5, nested: { deep: [1, 'two'] } } },
      part: {
        type: 'error',
        error: Object.assign(new Error('boom'), { statusCode: 500, isRetryable: true }),
      },
      $ai: 'a key that looks like the tag',
      fn: () => 1,
    };
    for (const json of [toAiJson(value), JSON.parse(JSON.stringify(toAiJson(value)))]) {
      const back = fromAiJson<typeof value>(json);
      expect(back.response.timestamp).toEqual(value.response.timestamp);
      expect(back.response.timestamp).toBeInstanceOf(Date);
      expect(back.content[0]!.data).toEqual(new Uint8Array([0, 1, 255]));
      expect(back.content[0]!.data).toBeInstanceOf(Uint8Array);
      expect(back.content[1]).toBeUndefined();
      expect(back.source).toEqual(new URL('https://example.com/a?b=1'));
      expect(back.providerMetadata).toEqual(value.providerMetadata);
      expect(back.part.error).toBeInstanceOf(Error);
      expect(back.part.error).toMatchObject({ message: 'boom', statusCode: 500, isRetryable: true });
      expect(back.$ai).toBe('a key that looks like the tag');
      expect('fn' in back).toBe(false);
    }
  });
});
