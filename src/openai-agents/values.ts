/**
 * What the Agents SDK hands over is JSON data almost everywhere (items, usage, raw provider payloads);
 * what is not (a Date, bytes of an image or a file, an Error, `undefined` in an array) is stored tagged
 * (`{ "$oa": "date", "v": "2026-…" }`) and rebuilt by the shared value codec
 * (src/agent-shared/values.ts): the SDK gets the same values on the first execution as on every replay.
 * URLs are not tagged here (the stored form, and so a model call's fingerprint, stays as it was).
 */
import { valueCodec } from '../agent-shared/values';

const codec = valueCodec({ tag: '$oa', errorFields: ['status', 'code', 'type', 'requestID'], urls: false });

/** `value` as JSON data: Dates, bytes and Errors tagged, functions and AbortSignals dropped. */
export const toJsonValue: (value: unknown) => unknown = codec.toJson;

/**
 * A tool's output as JSON text when it is an object: the SDK hands the model `JSON.stringify(output)`,
 * and PostgreSQL's jsonb would hand back the keys sorted; kept as text, the model sees the key order
 * the tool returned, on the first execution as on every replay.
 */
export const toOrderedJson: (value: unknown) => unknown = codec.toOrderedJson;

/** The value `toJsonValue` encoded, rebuilt from its JSON form (as stored or as the codec returned it). */
export const fromJsonValue: <T = unknown>(json: unknown) => T = codec.fromJson;
