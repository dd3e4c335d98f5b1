/**
 * What the AI SDK hands over that JSON cannot hold: a model's `response.timestamp` (a Date), files and
 * reasoning data (Uint8Array), URLs, an `error` stream part (an Error). Stored tagged (`{ "$ai": "date",
 * "v": "2026-…" }`) and rebuilt from the tags by the shared value codec (src/agent-shared/values.ts):
 * the SDK gets the same values on the first execution as on every replay.
 */
import { valueCodec } from '../agent-shared/values';

const codec = valueCodec({
  tag: '$ai',
  errorFields: ['statusCode', 'isRetryable', 'code', 'responseBody', 'url'],
  urls: true,
});

/** `value` as JSON data (see `ValueCodec.toJson`). */
export const toAiJson: (value: unknown) => unknown = codec.toJson;

/** The value `toAiJson` encoded, rebuilt from its JSON form (as stored or as the codec returned it). */
export const fromAiJson: <T = unknown>(json: unknown) => T = codec.fromJson;
